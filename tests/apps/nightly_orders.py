"""A new user's nightly job, written as one would without knowing sparkrecover: inputs read first
(the customers with ``inferSchema``), messy orders cleaned and cached, a printed count, the latest
day collected to name the output, a left join, a daily aggregation, one big partitioned write and
an append to a history folder.

    nightly_orders.py ORDERS CUSTOMERS OUT HISTORY

Each task of the big write sleeps ``WRITE_SLEEP`` seconds (default 0) once, so a test can kill the
driver in the middle of it.
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

orders_path, customers_path, out, history = sys.argv[1:5]
pause = float(os.environ.get("WRITE_SLEEP", "0"))
spark = SparkSession.builder.appName("nightly-orders").getOrCreate()

customers = spark.read.option("header", True).option("inferSchema", True).csv(customers_path)
raw = spark.read.option("header", True).csv(orders_path)
clean = (
    raw.withColumn("amount", F.expr("try_cast(amount AS DOUBLE)"))
    .withColumn("day", F.expr("try_cast(order_date AS DATE)"))
    .where("amount IS NOT NULL AND amount >= 0 AND day IS NOT NULL")
    .dropDuplicates(["order_id"])
    .cache()
)
print("clean orders:", clean.count())
latest = clean.agg(F.max("day")).collect()[0][0]

daily = (
    clean.join(customers, "customer_id", "left")
    .groupBy("day", "country")
    .agg(F.round(F.sum("amount"), 2).alias("revenue"), F.count("*").alias("orders"))
)
_slept: set[int] = set()


def slow(value):
    attempt = TaskContext.get().taskAttemptId()
    if attempt not in _slept:  # once per task (a Python worker runs many)
        _slept.add(attempt)
        time.sleep(pause)
    return value


(
    daily.repartition(24, "day")
    .withColumn("orders", F.udf(slow, "long")("orders"))
    .write.mode("overwrite")
    .partitionBy("day")
    .parquet(f"{out}/daily-{latest}")
)
daily.withColumn("run", F.lit(str(latest))).write.mode("append").parquet(history)
spark.stop()
