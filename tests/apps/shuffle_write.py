"""A nightly job's shape: a map side, a shuffle (join, aggregation, sort, ...), one big write.

    shuffle_write.py OUT MARKERS SHAPE[,SHAPE...] [MAPS] [WRITES]

SHAPE: ``join`` (sort-merge join), ``agg`` (groupBy), ``sort`` (orderBy), ``repcol``
(``repartition(WRITES, col)``), ``sortagg`` (a groupBy of every id, then an orderBy of the sums,
sampled so sparsely that its range bounds depend on the sample's seed), ``etl`` (a join, then an
aggregation), ``indeterminate`` (``etl``
then a round-robin ``repartition`` that Spark calls INDETERMINATE: its input is UNORDERED and
``spark.sql.execution.sortBeforeRepartition`` is off).

Adaptive execution is on; each reduce partition stays a partition of its own unless ``ADVISORY``
(an advisory partition size) is set: then adaptive execution coalesces them to that size.
Each task that computes a map partition leaves ``map-<partition>-<task id>-<ns>`` in MARKERS, each
that computes a post-shuffle partition ``write-<partition>-<task id>-<ns>`` (sleeping
``SHUFFLE_WRITE_SLEEP`` seconds, default 0.5), so a test can count what an attempt computed.
With ``HOLD_TASKS`` (``FROM:FILE``), the write tasks of partitions from FROM on (of the last shape)
then wait until FILE exists: a test holds tasks in flight for its kill (tests/e2e/support.py's ``Hold``);
with ``HOLD_MAPS`` (``FROM:FILE``), the same for the map tasks of the marked side.
Several shapes, comma-separated, run one after the other in one application, each writing
OUT/<shape> and marking in MARKERS/<shape> (one JVM start for several comparisons).
With ``SHUFFLE_WARM_UP`` set, a small job of the same kinds of work (a Python UDF, a shuffle, an
aggregation reading it, a Python UDF after it) runs first and is collected, in every application:
a benchmark compares tasks of JVMs that have both run such work before (scripts/bench_shuffle_resume.py).
With ``SHUFFLE_TWIN`` set too (a resume's side of that benchmark), a twin of the work a resume
skips runs after it, computed over other ids (no sleep, no marker; its own shuffles): the map side
of the first shape (MAPS + 4 Python UDF map tasks: the first shape's and the warm-up's, the small
side's range tasks, the join and partial aggregation) and one task reading a partition of its
aggregation (a ``limit(1)``), so that the resumed executors start the write having run the tasks
the full run's executors ran.
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

out, markers, shape = sys.argv[1], sys.argv[2], sys.argv[3]
maps = int(sys.argv[4]) if len(sys.argv) > 4 else 8
writes = int(sys.argv[5]) if len(sys.argv) > 5 else 8
ROWS = 100
_seen: set[int] = set()  # task attempts that left their marker (a Python worker runs many)
HOLD_FROM, _, HOLD_FILE = os.environ.get("HOLD_TASKS", "0:").partition(":")
HOLD_MAPS = os.environ.get("HOLD_MAPS", "0:").partition(":")[::2]


def hold(file: str):
    """Wait for the test's signal (a bounded wait: a worker left behind ends by itself)."""
    deadline = time.monotonic() + 900
    while not os.path.exists(file) and time.monotonic() < deadline:
        time.sleep(0.05)


def marking(kind: str, sleep: float, folder: str, held: bool = False):
    first, file = (HOLD_FROM, HOLD_FILE) if kind == "write" else HOLD_MAPS

    def mark(value):
        context = TaskContext.get()
        if context.taskAttemptId() not in _seen:
            _seen.add(context.taskAttemptId())
            name = f"{kind}-{context.partitionId()}-{context.taskAttemptId()}-{time.time_ns()}"
            open(os.path.join(folder, name), "w").close()
            time.sleep(sleep)
            if (held or kind == "map") and file and context.partitionId() >= int(first):
                hold(file)
        return value

    return F.udf(mark, LongType())


spark = (
    SparkSession.builder.appName("shuffle-write")
    .config("spark.sql.adaptive.enabled", "true")
    .config("spark.sql.autoBroadcastJoinThreshold", "-1")
    .config("spark.sql.shuffle.partitions", str(writes))
    .config("spark.sql.adaptive.coalescePartitions.enabled", "ADVISORY" in os.environ)
    .config("spark.sql.adaptive.advisoryPartitionSizeInBytes", os.environ.get("ADVISORY", "64m"))
    .getOrCreate()
)


def frame_of(shape: str, folder: str):
    os.makedirs(folder, exist_ok=True)
    on_map = marking("map", float(os.environ.get("SHUFFLE_MAP_SLEEP", "0")), folder)
    left = spark.range(0, maps * ROWS, numPartitions=maps).withColumn("v", on_map("id"))
    right = spark.range(0, 50).selectExpr("id AS k", "id * 7 AS w")
    joined = left.join(right, left.id % 50 == right.k).select("id", "v", "w")
    if shape == "join":
        return joined
    if shape == "agg":
        return left.groupBy((F.col("id") % (writes * 5)).alias("g")).agg(F.sum("v").alias("s"))
    if shape == "sort":
        return left.orderBy(F.col("v").desc())
    if shape == "sortagg":
        # Ten sample points per range partition: each map partition (75 groups) is sampled, not
        # taken whole, so the bounds depend on the seed (an RDD id), as they do on real data.
        spark.conf.set("spark.sql.execution.rangeExchange.sampleSizePerPartition", "10")
        return left.groupBy(F.col("id").alias("g")).agg(F.sum("v").alias("s")).orderBy(F.col("s").desc())
    if shape == "repcol":
        return left.repartition(writes, "id")
    if shape in ("etl", "indeterminate"):
        frame = joined.groupBy((F.col("id") % (writes * 5)).alias("g")).agg(
            F.sum("v").alias("s"), F.sum("w").alias("t")
        )
        if shape == "indeterminate":
            spark.conf.set("spark.sql.execution.sortBeforeRepartition", "false")
            frame = frame.repartition(writes)
        return frame
    raise SystemExit(f"unknown shape {shape}")


if os.environ.get("SHUFFLE_WARM_UP"):
    plain = F.udf(lambda value: value, LongType())
    spark.range(0, writes * ROWS, numPartitions=4).withColumn("v", plain("id")).groupBy(
        (F.col("id") % writes).alias("g")
    ).agg(F.sum("v").alias("s")).withColumn("x", plain(F.lit(1))).collect()

if os.environ.get("SHUFFLE_TWIN"):
    plain = F.udf(lambda value: value, LongType())
    twin = spark.range(10**9, 10**9 + (maps + 4) * ROWS, numPartitions=maps + 4).withColumn("v", plain("id"))
    small = spark.range(0, 50).selectExpr("id AS k", "id * 11 AS w")  # not the kept small side
    twin.join(small, twin.id % 50 == small.k).groupBy((F.col("id") % (writes * 5)).alias("g")).agg(
        F.sum("v").alias("s"), F.sum("w").alias("t")
    ).limit(1).collect()  # one task of the aggregation: a write task's reads, not the whole shuffle

shapes = shape.split(",")
for one in shapes:
    target, folder = (out, markers) if len(shapes) == 1 else (os.path.join(out, one), os.path.join(markers, one))
    on_write = marking("write", float(os.environ.get("SHUFFLE_WRITE_SLEEP", "0.5")), folder, one == shapes[-1])
    frame_of(one, folder).withColumn("x", on_write(F.lit(1))).write.mode("overwrite").parquet(target)
spark.stop()
