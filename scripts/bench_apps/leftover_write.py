"""What a resume of tests/apps/replayed_past.py has left to do, as a plain application of its own
(bench_replay.py): the orders read with their schema given (no inference, no action before the
write), the big write's query, and only the partitions ``LEFT`` names computed; the others are
filtered out after the shuffle, so they run as empty tasks, as a resume's kept partitions do.

    leftover_write.py ORDERS OUT LEFT      (LEFT: "12,13,14,15"; tasks sleep WRITE_SLEEP once)
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

orders_path, out, left = sys.argv[1:4]
pause = float(os.environ.get("WRITE_SLEEP", "0"))
spark = SparkSession.builder.appName("leftover-write").getOrCreate()
SCHEMA = "order_id INT, country STRING, day DATE, amount DOUBLE"  # what replayed_past.py infers
orders = spark.read.option("header", True).schema(SCHEMA).csv(orders_path)
_slept: set[int] = set()


def slow(value):
    attempt = TaskContext.get().taskAttemptId()
    if attempt not in _slept:  # once per task, as replayed_past.py's
        _slept.add(attempt)
        time.sleep(pause)
    return value


(
    orders.repartition(16, "order_id")
    .where(F.spark_partition_id().isin([int(p) for p in left.split(",")]))
    .withColumn("amount", F.udf(slow, "double")("amount"))
    .write.mode("overwrite")
    .parquet(out)
)
spark.stop()
