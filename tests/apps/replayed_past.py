"""A nightly script whose past is worth replaying: orders read with ``inferSchema`` and cached, a
printed count, two ``show`` tables (one of ``describe``), a count over ``rand()`` that names a
folder, a ``limit`` without an order, a collect that names the output, a small write, one big write
whose tasks can be held, and a collect too large to keep (``BIG``).

    replayed_past.py ORDERS OUT

Each task of the big write sleeps ``WRITE_SLEEP`` seconds (default 0) once, so a test can kill the
driver in the middle of it.
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

orders_path, out = sys.argv[1:3]
pause = float(os.environ.get("WRITE_SLEEP", "0"))
spark = SparkSession.builder.appName("replayed-past").getOrCreate()

orders = spark.read.option("header", True).option("inferSchema", True).csv(orders_path).cache()
print("orders:", orders.count())
orders.groupBy("country").agg(F.round(F.sum("amount"), 2).alias("revenue")).orderBy("country").show()
orders.describe("amount").show()
sampled = orders.where(F.rand() < 0.5).count()
print("sampled:", sampled)
print("some:", [tuple(row) for row in orders.limit(3).collect()])
print("big:", len(orders.select("order_id", "country", "amount").collect()))
latest = orders.agg(F.max("day")).collect()[0][0]
orders.where("amount > 400").write.mode("overwrite").parquet(f"{out}/sample_n={sampled}")
_slept: set[int] = set()


def slow(value):
    attempt = TaskContext.get().taskAttemptId()
    if attempt not in _slept:  # once per task (a Python worker runs many)
        _slept.add(attempt)
        time.sleep(pause)
    return value


(
    orders.repartition(16, "order_id")
    .withColumn("amount", F.udf(slow, "double")("amount"))
    .write.mode("overwrite")
    .parquet(f"{out}/daily-{latest}")
)
print("done")
spark.stop()
