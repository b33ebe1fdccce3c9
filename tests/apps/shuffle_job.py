"""A read -> shuffle -> result job, as a nightly ETL's core: slow map tasks, then a slow result stage.

    shuffle_job.py INPUT OUT MARKERS VARIANT [collect|write]

INPUT holds ``left/`` (one Parquet file per map partition, ids from ``p * ROWS``) and ``right/``.
VARIANT: ``agg`` (a groupBy), ``join`` (a sort-merge join of left and right, both sides shuffled,
then a groupBy), ``two`` (two groupBys: a shuffle reading a shuffle), ``indeterminate`` (a
round-robin ``repartition()`` after the groupBy: Spark calls that map stage INDETERMINATE), ``sorted``
(a groupBy, then an orderBy: a shuffle by range after one by hash).
``collect`` (default) collects the result and writes it as JSON lines with Python; ``write`` writes
it with ``df.write.parquet`` (a zero-code stage).

Each map partition of ``left`` leaves ``m-<partition>-<ns>`` in MARKERS when it is computed (its
first row, through a Python UDF), each result row ``w-<key>-<ns>``: a test counts what an attempt
computed from inside the app. With ``HOLD_TASKS`` (``FROM:FILE``), the result tasks of partitions
from FROM on wait, once they marked a row, until FILE exists: a test holds the result stage in
flight for its kill (tests/e2e/support.py's ``Hold``).
"""

import json
import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

source, out, markers, variant = sys.argv[1:5]
sink = sys.argv[5] if len(sys.argv) > 5 else "collect"
ROWS = 1000
MAP_SLEEP = float(os.environ.get("SHUFFLE_JOB_MAP_SLEEP", "0.5"))
RESULT_SLEEP = float(os.environ.get("SHUFFLE_JOB_RESULT_SLEEP", "0.3"))
KEYS = int(os.environ.get("SHUFFLE_JOB_KEYS", "16"))  # result rows (a divisor of 64)
REDUCES = os.environ.get("SHUFFLE_JOB_REDUCES", "8")  # spark.sql.shuffle.partitions
HOLD_FROM, _, HOLD_FILE = os.environ.get("HOLD_TASKS", "0:").partition(":")


def mark_map(value):
    if value % ROWS == 0:  # the first row of its map partition
        open(os.path.join(markers, f"m-{value // ROWS}-{time.time_ns()}"), "w").close()
        time.sleep(MAP_SLEEP)
    return value


def mark_result(key):
    open(os.path.join(markers, f"w-{key}-{time.time_ns()}"), "w").close()
    time.sleep(RESULT_SLEEP)
    deadline = time.monotonic() + 900  # bounded: a worker left behind ends by itself
    while HOLD_FILE and TaskContext.get().partitionId() >= int(HOLD_FROM) and not os.path.exists(HOLD_FILE):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return key


spark = (
    SparkSession.builder.appName("shuffle-job")
    # One map partition per input file, however small.
    .config("spark.sql.files.maxPartitionBytes", "8MB")
    .config("spark.sql.files.openCostInBytes", "8MB")
    .config("spark.sql.adaptive.enabled", "true")
    # Many small result partitions (adaptive execution would coalesce them into one).
    .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
    .config("spark.sql.shuffle.partitions", REDUCES)
    .config("spark.sql.autoBroadcastJoinThreshold", "-1")  # a sort-merge join
    .getOrCreate()
)
os.makedirs(markers, exist_ok=True)
left = spark.read.parquet(os.path.join(source, "left")).withColumn("id", F.udf(mark_map, LongType())("id"))
if variant == "agg":
    result = left.groupBy((F.col("id") % KEYS).alias("k")).agg(F.count("*").alias("n"), F.sum("id").alias("total"))
elif variant == "join":
    right = spark.read.parquet(os.path.join(source, "right"))
    joined = left.join(right, (left["id"] % 97) == right["rid"])
    result = joined.groupBy((F.col("id") % KEYS).alias("k")).agg(
        F.count("*").alias("n"), F.sum("weight").alias("total")
    )
elif variant == "two":
    first = left.groupBy((F.col("id") % 64).alias("g")).agg(F.count("*").alias("c"), F.sum("id").alias("s"))
    result = first.groupBy((F.col("g") % KEYS).alias("k")).agg(F.sum("c").alias("n"), F.sum("s").alias("total"))
elif variant == "sorted":
    # A groupBy, then a sort: the sort's shuffle partitions by range, the groupBy's by hash.
    grouped = left.groupBy((F.col("id") % KEYS).alias("k")).agg(F.count("*").alias("n"), F.sum("id").alias("total"))
    result = grouped.orderBy(F.col("total").desc())
elif variant == "indeterminate":
    # Without the local sort Spark does first by default, a round-robin repartition of UNORDERED
    # rows is order-sensitive: Spark marks its map stage INDETERMINATE.
    spark.conf.set("spark.sql.execution.sortBeforeRepartition", "false")
    grouped = left.groupBy((F.col("id") % KEYS).alias("k")).agg(F.count("*").alias("n"), F.sum("id").alias("total"))
    result = grouped.repartition(4)
else:
    raise SystemExit(f"unknown variant {variant}")
result = result.withColumn("k", F.udf(mark_result, LongType())("k"))
if sink == "write":
    result.write.mode("overwrite").parquet(out)
else:
    rows = [row.asDict() for row in result.collect()]
    with open(out + ".tmp", "w") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    os.replace(out + ".tmp", out)
spark.stop()
