"""Task-level resume of one DataFrame write, the driver's side (docs/design.md §4a).

A write that died keeps the partitions whose tasks committed (FileOutputCommitter v1 leaves each
in ``<out>/_temporary/0/task_*``). The resumed write runs the same partitions through
``KeptPartitionsRDD`` (kept ones empty, not computed) under ``ResumingCommitProtocol``, which adds
the set-aside task folders to the job before its commit. Both classes are in the package's jar
(``sparkrecover/jvm/``), which ``submit`` puts on the driver's classpath.

- ``shape_of(frame)``: how many partitions the write runs, whether partition *i* holds the same
  rows in another application, and a digest of each partition's input, to compare across attempts.
- ``without_partitions(frame, kept)``: the frame to write, in every attempt (nothing kept the
  first time), so that partition *i* means the same thing in both.
- ``resuming_commit(spark, kept_dir, kept)``: the settings of the resumed write, for one write.
- ``write_committer(spark, path, ...)``: how the write commits its tasks, or why reusing them cannot
  work for it.

Runs in the driver; imports pyspark only inside functions.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.jvm import (
    COMMIT_PROTOCOL_CONF,
    DEFAULT_COMMIT_PROTOCOL,
    FACTORY_COMMITTER_CONF,
    FENCED_PROTOCOL_CLASS,
    KEPT_DIR_CONF,
    KEPT_JOB_CONF,
    KEPT_PARTITIONS_CONF,
    KEPT_RDD_CLASS,
    PROBE_CLASS,
    RESUMING_PROTOCOL_CLASS,
    find_class,
)
from sparkrecover.kinds import CommitKind

DEFAULT_PARQUET_COMMITTER = "org.apache.parquet.hadoop.ParquetOutputCommitter"
ALGORITHM_KEY = "mapreduce.fileoutputcommitter.algorithm.version"
# Formats Spark writes through FileFormatWriter and a commit protocol into an output folder (the
# ones whose committed task output can be kept); their DataFrameWriter methods are named after them.
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "text", "avro", "xml"})

# Functions the optimizer folds into literals (so the optimized plan calls them deterministic)
# whose value differs in another application. Matched in the analyzed plan's text.
_CLOCK = re.compile(
    r"\b(current_timestamp|current_date|current_time|now|curdate|localtimestamp|"
    r"current_timezone|unix_timestamp)\(",
    re.IGNORECASE,
)
# A range partitioning exchange in a physical plan's text (orderBy, repartitionByRange).
_RANGE = re.compile(r"Exchange rangepartitioning\(")


@dataclass
class WriteShape:
    """What a write's partitions are. ``digest`` is equal across applications only when the
    partition count, every partition's input slices (a shuffle's map side included) and the
    partition specs of every shuffle read are equal."""

    partitions: int
    reusable: bool  # partition i holds the same rows in another application
    reason: str | None  # why not (one sentence), when not reusable
    slices: list[str] = field(default_factory=list)  # per partition: digest of its input slices
    digest: str = ""
    # Per shuffle the write reads: its partitions' specs ("3", "3-5" coalesced, "3[0-4]" a skew
    # split), as adaptive execution chose them; and their digest (None: no shuffle is read).
    specs: list[str] = field(default_factory=list)
    specs_digest: str | None = None
    # The frame's query ran its map stages for the probe (``toRdd``): the write must run that
    # same RDD (``without_partitions``), or it would plan and run them a second time.
    executed: bool = False


def shape_of(frame: Any) -> WriteShape:
    """The shape of the write of ``frame`` through ``without_partitions``: the RDD probed is
    ``queryExecution().toRdd()``, which that write runs one to one. With adaptive execution and a
    shuffle in the plan, ``toRdd`` runs the shuffle's map stages now, inside a SQL execution of
    its own (as the write would); the write then reads them through ``without_partitions``, so
    the frame's QueryExecution runs once."""
    try:
        qe = frame._jdf.queryExecution()
    except AttributeError:
        return WriteShape(0, False, "Spark Connect: the driver cannot see the query's plan")
    shape = WriteShape(0, False, None)
    try:
        reason = _plan_reason(qe)
        jvm = frame.sparkSession._jvm
        rdd = _query_rdd(jvm, qe)
        shape.executed = True
        _measure(shape, jvm, rdd, reason, lambda: str(qe.executedPlan()))
    except Exception as error:  # a probe that fails must never fail the write
        shape.reason = f"its partitions could not be probed ({type(error).__name__}: {_first_line(error)})"
    return shape


def shape_of_rdd(rdd: Any) -> WriteShape:
    """The shape of a Python RDD's partitions (a ``foreach``'s, driver/recording/foreach.py), as ``shape_of``
    measures a query's: an RDD has no plan to read, so Spark's determinism verdict and the probe of
    its lineage say it all. Nothing is computed."""
    shape = WriteShape(0, False, None)
    try:
        jrdd = rdd._jrdd.rdd()
        _measure(shape, rdd.ctx._jvm, jrdd, None, lambda: "")
    except Exception as error:  # a probe that fails must never fail the job
        shape.reason = f"its partitions could not be probed ({type(error).__name__}: {_first_line(error)})"
    return shape


def _measure(shape: WriteShape, jvm: Any, rdd: Any, reason: str | None, physical_plan: Callable[[], str]) -> None:
    """Fill ``shape`` from the JVM ``rdd`` that runs: its partition count, Spark's verdict, the probe."""
    count = int(rdd.getNumPartitions())
    if reason is None:
        reason = _rdd_reason(rdd)
    slices, specs, ranges = _probe(jvm, rdd, count)
    met, read = ranges
    if reason is None and (met != read or (not met and _RANGE.search(physical_plan()))):
        reason = (
            "it reads a range partitioning whose bounds could not be read: they come from "
            "a sample of rows, which may differ in another application"
        )
    shape.specs = specs
    shape.specs_digest = hashlib.sha256("\n".join(specs).encode()).hexdigest()[:32] if specs else None
    text = f"{count}\n" + "\n".join(slices) + "\n--\n" + "\n".join(specs)
    shape.digest = hashlib.sha256(text.encode()).hexdigest()[:32]
    shape.partitions, shape.reusable, shape.reason, shape.slices = count, reason is None, reason, slices


def _query_rdd(jvm: Any, qe: Any) -> Any:
    """``qe.toRdd()`` inside a SQL execution of its own, as a write's would run: the map stages it
    runs belong to the query (Spark's UI, and whatever reads ``spark.sql.execution.id``)."""
    return _required_class(jvm, PROBE_CLASS).execute(qe)


def _plan_reason(qe: Any) -> str | None:
    if not qe.optimizedPlan().deterministic():
        return "the query is not deterministic (rand, uuid, shuffle, a non-deterministic UDF, ...)"
    if _CLOCK.search(qe.analyzed().toString()):
        return "the plan reads the current time (current_timestamp, now, current_date, ...)"
    return None


def _rdd_reason(rdd: Any) -> str | None:
    """Spark's own verdict, as it gives it when a fetch failure makes it recompute part of a
    stage: DETERMINATE and UNORDERED (after a shuffle: the same rows in another order, which a
    file write turns into the same output) are reused; INDETERMINATE (rows that depend on the
    order of a shuffle's output) is not."""
    level = str(rdd.outputDeterministicLevel().toString())
    if level != "INDETERMINATE":
        return None
    return f"its RDD is {level} in Spark's terms: partition i may hold other rows in another application"


def _probe(jvm: Any, rdd: Any, count: int) -> tuple[list[str], list[str], tuple[int, int]]:
    """Per partition of ``rdd``: a digest of the input it reads, following narrow dependencies
    down to the leaves (files: path, start, length, modification time) and shuffle dependencies
    up to their map side; the specs of each shuffle read; and how many range partitionings were
    met and had their bounds read. Computed in the JVM (``WriteShapeProbe``) in one call: a walk
    through Py4J costs seconds per 10,000 partitions."""
    text = str(_required_class(jvm, PROBE_CLASS).probe(rdd))
    digests, specs, ranges = text.split("\n--")
    found = digests.split("\n") if digests else []
    if len(found) != count:
        raise RuntimeError(f"the probe saw {len(found)} partitions of {count}")
    _, met, read = ranges.split()
    return found, [line for line in specs.split("\n") if line], (int(met), int(read))


def without_partitions(frame: Any, kept: Collection[int]) -> Any:
    """``frame`` with the ``kept`` partitions empty and never computed, the others unchanged, the
    partition count the same. Always write through this (``kept`` empty in a first attempt)."""
    from pyspark.sql import DataFrame

    session = frame.sparkSession
    jvm = session._jvm
    ids = ",".join(str(int(i)) for i in sorted(set(kept)))
    wrapped = _required_class(jvm, KEPT_RDD_CLASS)(frame._jdf.queryExecution().toRdd(), ids)
    jdf = session._jsparkSession.internalCreateDataFrame(wrapped, frame._jdf.schema(), False)
    return DataFrame(jdf, session)


@contextlib.contextmanager
def resuming_commit(
    spark: Any, kept_dir: str | None, kept: Collection[int], kept_job: str | None = None
) -> Iterator[None]:
    """For one write: ``ResumingCommitProtocol`` brings the ``task_*`` folders (or the magic
    committer's pendingsets, committed under the S3A job UUID ``kept_job``) of ``kept_dir`` (a
    Hadoop path URI on the output's filesystem, not inside an output that overwrite deletes) into
    the job before it commits; the ``kept`` partitions' empty tasks commit nothing. The previous
    settings are restored afterwards, also on error."""
    values = {
        COMMIT_PROTOCOL_CONF: RESUMING_PROTOCOL_CLASS,
        KEPT_DIR_CONF: kept_dir or "",
        KEPT_PARTITIONS_CONF: ",".join(str(int(i)) for i in sorted(set(kept))),
        KEPT_JOB_CONF: kept_job or "",
    }
    conf = spark._jsparkSession.conf()  # the JVM's: None-safe get, and unset of an absent key
    previous: dict[str, str | None] = {key: (conf.get(key) if conf.contains(key) else None) for key in values}
    try:
        for key, value in values.items():
            conf.set(key, value)
        yield
    finally:
        for key, before in previous.items():
            if before is None:
                conf.unset(key)
            else:
                conf.set(key, before)


# How a write commits its tasks, as far as a resumed write can keep them: FileOutputCommitter's
# task folders (algorithm 1), the magic committer's pendingsets (tasklists.pendingsets), or the
# manifest committer's task manifests (tasklists.manifests).
FOLDERS, PENDINGSETS, MANIFESTS = CommitKind.FOLDERS, CommitKind.PENDINGSETS, CommitKind.MANIFESTS
FILE_COMMITTER_FACTORY = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"
S3A_COMMITTER_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
MANIFEST_COMMITTER_FACTORY = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory"


def write_committer(
    spark: Any,
    path: str | None,
    *,
    mode: str = "errorifexists",
    options: Mapping[str, str] | None = None,
    frame: Any = None,
    format: str = "parquet",
) -> tuple[str | None, str | None]:
    """How a write of ``frame`` to ``path`` (as Spark names it) with this session commits its tasks
    (``FOLDERS``, ``PENDINGSETS`` or ``MANIFESTS``) and None, or None and why its committed tasks
    cannot be reused. ``options`` are the writer's options (they join the job's Hadoop
    configuration); ``mode`` its save mode; ``format`` its source. Tables (no path) are refused: a
    catalog table would not learn of the kept tasks' partitions."""
    if frame is not None and not hasattr(frame, "_jdf"):
        return None, "Spark Connect: the driver cannot change how the write runs"
    if not hasattr(spark, "_jsparkSession"):
        return None, "Spark Connect: the driver cannot change how the write runs"
    if not path:
        return None, "the write has no output path (a table or another sink)"
    if find_class(spark._jvm, KEPT_RDD_CLASS) is None:
        # No jar (no JDK to build it, SPARKRECOVER_NO_JVM_LISTENER, or javac failed against this
        # Spark): the write must still run, whole, as it would without sparkrecover.
        return None, "the sparkrecover jar is not loaded (no JDK to build it, or SPARKRECOVER_NO_JVM_LISTENER is set)"
    options = {str(k): str(v) for k, v in (options or {}).items()}
    session = spark._jsparkSession
    conf = session.sessionState().newHadoopConf()  # the SparkContext's, plus every SQL conf
    for key, value in options.items():
        conf.set(key, value)

    def setting(key: str, default: str | None = None) -> str | None:
        value = options.get(key)
        if value is None and session.conf().contains(key):
            value = session.conf().get(key)
        return default if value is None else value

    protocol = setting(COMMIT_PROTOCOL_CONF, DEFAULT_COMMIT_PROTOCOL)
    if protocol not in (DEFAULT_COMMIT_PROTOCOL, FENCED_PROTOCOL_CLASS, RESUMING_PROTOCOL_CLASS):
        return None, f"a custom commit protocol is configured ({COMMIT_PROTOCOL_CONF}={protocol})"
    overwrite = options.get("partitionOverwriteMode") or setting("spark.sql.sources.partitionOverwriteMode") or ""
    if mode.lower() == "overwrite" and overwrite.lower() == "dynamic":
        return None, "dynamic partition overwrite: its job commit would not move the kept tasks' partitions"
    try:
        hpath = spark._jvm.org.apache.hadoop.fs.Path(path)
        scheme = hpath.toUri().getScheme()  # no scheme: the default filesystem's
        scheme = str(scheme or hpath.getFileSystem(conf).getUri().getScheme() or "file").lower()
        bucket = str(hpath.toUri().getAuthority() or "")
    except Exception as error:
        return None, f"the output's filesystem is unavailable ({type(error).__name__}: {_first_line(error)})"
    # Parquet names its committer itself (spark.sql.parquet.output.committer.class), unless the
    # committer comes from the factory for every format, as FencedCommitProtocol does where it
    # stands in for spark-hadoop-cloud's PathOutputCommitProtocol (driver/process/fence.py).
    if format.lower() == "parquet" and (conf.get(FACTORY_COMMITTER_CONF) or "").lower() != "true":
        committer = setting("spark.sql.parquet.output.committer.class", DEFAULT_PARQUET_COMMITTER)
        if committer != DEFAULT_PARQUET_COMMITTER:
            return None, f"a custom Parquet output committer is configured ({committer})"
        return _file_output_committer(conf)
    custom = conf.get("spark.sql.sources.outputCommitterClass")
    if custom:
        return None, f"a custom output committer is configured (spark.sql.sources.outputCommitterClass={custom})"
    factory = (
        conf.get("mapreduce.outputcommitter.factory.class")
        or conf.get(f"mapreduce.outputcommitter.factory.scheme.{scheme}")
        or FILE_COMMITTER_FACTORY
    ).strip()
    if factory == FILE_COMMITTER_FACTORY:
        return _file_output_committer(conf)
    if factory == MANIFEST_COMMITTER_FACTORY:
        if mode.lower() not in ("overwrite", "append"):
            return None, (
                f"the manifest committer's committed tasks stay inside the target, which a {mode.lower()} "
                "write needs gone"
            )
        return MANIFESTS, None
    if factory != S3A_COMMITTER_FACTORY:
        return None, f"the output committer comes from {factory}, whose committed tasks are not adopted"
    # S3ACommitterFactory: the job's fs.s3a.committer.name, else the bucket's, else "file".
    name = (conf.get("fs.s3a.committer.name") or conf.get(f"fs.s3a.bucket.{bucket}.committer.name") or "file").strip()
    if name == "file":
        return _file_output_committer(conf)
    if name == "magic":
        return PENDINGSETS, None
    return None, (
        f"the S3A {name} committer keeps its committed tasks' pending uploads on the cluster filesystem, "
        "where they are not adopted (the magic committer's are)"
    )


def _file_output_committer(conf: Any) -> tuple[str | None, str | None]:
    algorithm = conf.get(ALGORITHM_KEY) or "1"  # unset: Spark sets 1 in every SparkContext
    if algorithm.strip() != "1":
        return None, (
            f"the output committer uses algorithm {algorithm} ({ALGORITHM_KEY}): committed tasks "
            "write straight into the output, there is nothing to keep"
        )
    return FOLDERS, None


def _required_class(jvm: Any, name: str) -> Any:
    found = find_class(jvm, name)
    if found is None:
        raise RuntimeError(f"{name} is not on the driver's classpath (the sparkrecover jar is not loaded)")
    return found


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else ""
