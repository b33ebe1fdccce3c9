"""The JVM classes sparkrecover ships, as Java sources compiled on first use into one jar for
the Spark in use (``launch/jvm_files/listener_jar.py``), and every name both processes refer to them by:
the classes, the Spark settings that install them and the settings they read. A name spelled
here is spelled nowhere else in Python (``tests/jvm/test_names.py`` also checks each setting
against the Java constant that reads it)."""

from __future__ import annotations

import glob
import os
from typing import Any

FOLDER = os.path.dirname(os.path.abspath(__file__))

# The classes.
LISTENER_CLASS = "sparkrecover.jvm.bridge.SparkRecoverListener"
# spark.shuffle.manager when map outputs are kept (launch/shuffles.py, docs/shuffles.md) ...
SHUFFLE_MANAGER_CLASS = "sparkrecover.jvm.shuffle.KeepingShuffleManager"
# ... and in spark.plugins, how executors tell the driver which map outputs they kept.
KEEPING_PLUGIN_CLASS = "sparkrecover.jvm.shuffle.KeepingPlugin"
# ... and on a cluster, Spark's local-disk shuffle storage that lets the driver serve a lost
# executor's map outputs from their copies (docs/shuffles.md).
KEEPING_IO_CLASS = "sparkrecover.jvm.shuffle.KeepingShuffleDataIO"
KEPT_RDD_CLASS = "sparkrecover.jvm.commit.KeptPartitionsRDD"
PROBE_CLASS = "sparkrecover.jvm.commit.WriteShapeProbe"
# Spark's default commit protocol plus the lease check at job commit (driver/process/fence.py) ...
FENCED_PROTOCOL_CLASS = "sparkrecover.jvm.commit.FencedCommitProtocol"
# ... which this one extends with a resumed write's kept task folders (driver/tasks/partitions.py).
RESUMING_PROTOCOL_CLASS = "sparkrecover.jvm.commit.ResumingCommitProtocol"
# Listings of a Hadoop filesystem in one call (driver/process/hadoopfs.py).
LISTING_CLASS = "sparkrecover.jvm.bridge.HadoopListing"
# Whether the driver is being stopped (its job aborts keep committed task output), and the JVM's
# SIGINT and SIGTERM handed to the Python driver (driver/process/signals.py).
SIGNALS_CLASS = "sparkrecover.jvm.bridge.DriverSignals"

# Spark's settings that install them, and Spark's own class they replace.
LISTENERS_CONF = "spark.extraListeners"
SHUFFLE_MANAGER_CONF = "spark.shuffle.manager"
PLUGINS_CONF = "spark.plugins"
SHUFFLE_IO_CONF = "spark.shuffle.sort.io.plugin.class"
# Spark 3.5's executors create their shuffle manager before they fetch --jars: the jar goes here.
EXECUTOR_CLASS_PATH_CONF = "spark.executor.extraClassPath"
COMMIT_PROTOCOL_CONF = "spark.sql.sources.commitProtocolClass"
DEFAULT_COMMIT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"

# spark-hadoop-cloud's protocol for Hadoop's PathOutputCommitters (the S3A committers): where the
# application names it, FencedCommitProtocol stands in for it, with this set (driver/process/fence.py).
PATH_OUTPUT_PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
FACTORY_COMMITTER_CONF = "sparkrecover.commit.factory"
# hadoop-aws's magic committer, whose committed tasks are pendingsets (driver/tasks/partitions.py).
MAGIC_COMMITTER = "org.apache.hadoop.fs.s3a.commit.magic.MagicS3GuardCommitter"

# What ResumingCommitProtocol reads from the write's Hadoop configuration.
KEPT_DIR_CONF = "sparkrecover.kept.dir"
KEPT_PARTITIONS_CONF = "sparkrecover.kept.partitions"
# The dead job's S3A UUID, under which a resumed write adopts its pendingsets.
KEPT_JOB_CONF = "sparkrecover.kept.job"

# Spark local properties the listener reads from a job: set by the stage lifecycle while a stage
# does its work (driver/lifecycle/stages.py), and the partitions a resumed write keeps (driver/tasks/taskresume.py).
WRITING_PROPERTY = "sparkrecover.writing"
KEPT_PROPERTY = "sparkrecover.writing.kept"

# What KeepingShuffleManager reads from the SparkConf (set by submit: launch/shuffles.py).
SHUFFLE_DIR_CONF = "spark.sparkrecover.shuffle.dir"
SHUFFLE_MODE_CONF = "spark.sparkrecover.shuffle.mode"
SHUFFLE_SCRIPT_CONF = "spark.sparkrecover.shuffle.script"
SHUFFLE_REUSE_CONF = "spark.sparkrecover.shuffle.reuse"
# What KeptServing reads: serve a lost executor's map outputs from their copies.
SHUFFLE_SERVE_CONF = "spark.sparkrecover.shuffle.serve"


def sources() -> list[str]:
    """Every Java source of the jar, in a stable order (the jar's cache key digests them all)."""
    return sorted(glob.glob(os.path.join(FOLDER, "**", "*.java"), recursive=True))


def find_class(gateway_jvm: Any, name: str) -> Any:
    """The class ``name`` as Py4J sees it through ``gateway_jvm`` (``sc._jvm``), or None when it
    is not on the driver's classpath (the jar is not loaded: Py4J then answers with a package)."""
    from py4j.java_gateway import JavaClass

    found = gateway_jvm
    for part in name.split("."):
        found = getattr(found, part)
    return found if isinstance(found, JavaClass) else None
