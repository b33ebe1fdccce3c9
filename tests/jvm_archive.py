"""A class-data-sharing archive of Spark's classes for the JVMs the tests start.

Every spark-submit a test starts loads and verifies the same few thousand classes of Spark's jars
from scratch; with a dynamic CDS archive (JDK 13 and newer) it maps them, already parsed, from one
file: measured on this project's 2-core machine, a small job's spark-submit then needed 6.4-6.9 s
of user CPU instead of 10.9-13.5 s (docs/contributing.md). The archive is built once per Java,
Spark and set of flags, by one spark-submit of ``tests/apps/warm_classes.py`` that writes it at
exit, and kept in the virtual environment. A JVM whose class path or Java does not match the
archive ignores it (``-Xshare:auto``, the default) and starts as before; its CDS messages are off
so that they never reach a test's output.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import subprocess
import sys
import tempfile

from tests.helpers import APPS

APP = os.path.join(APPS, "warm_classes.py")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
BUILD_TIMEOUT = 600


def archive_options(jvm_options: str) -> str:
    """The options that make a JVM of pyspark's Spark (the one the tests run: they unset
    SPARK_HOME) use the archive with ``jvm_options`` (built first when missing); "" when it cannot
    be built (the tests then run without it)."""
    import pyspark

    spark_home = os.path.dirname(os.path.abspath(pyspark.__file__))
    spark_submit = os.path.join(spark_home, "bin", "spark-submit")
    path = _archive_path(spark_home, jvm_options)
    if path is None:
        return ""
    if not os.path.exists(path) and not _build(spark_submit, jvm_options, path):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _archive_path(spark_home: str, jvm_options: str) -> str | None:
    """Where the archive of this Java, this Spark and these flags lives (None: no Spark jars)."""
    jars = sorted(glob.glob(os.path.join(spark_home, "jars", "*.jar")))
    if not jars:
        return None
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    digest = hashlib.sha256()
    for part in (version, jvm_options, *(f"{jar}:{os.path.getsize(jar)}" for jar in jars)):
        digest.update(part.encode() + b"\0")
    return os.path.join(sys.prefix, "sparkrecover-test-cds", f"spark-{digest.hexdigest()[:16]}.jsa")


def _build(spark_submit: str, jvm_options: str, path: str) -> bool:
    """One spark-submit that exercises what the tests use, writing the archive when it exits."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    work = tempfile.mkdtemp(prefix="sparkrecover-cds-")
    partial = os.path.join(work, "spark.jsa")
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{jvm_options} -XX:ArchiveClassesAtExit={partial} {QUIET}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    command = [spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false", APP, work]
    try:
        done = subprocess.run(command, capture_output=True, env=env, timeout=BUILD_TIMEOUT, cwd=work)
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0 or not os.path.exists(partial):
        return False
    with contextlib.suppress(OSError):
        os.replace(partial, path)  # whole or not at all: a concurrent run may have put one there
    return os.path.exists(path)
