"""An unmodified PySpark script (no sparkrecover in it) for the zero-code mode tests.

    zerocode_app.py OUT [--slow-marker FILE]

Overwrites OUT/base, appends to OUT/events (a folder that already holds data), copies the events
into the table events_copy of the default catalog (default mode: errorifexists), and writes
OUT/report from both. --slow-marker makes the append hang on one row the first time (creating
FILE), so a test can kill the driver while the append's job is half done.
"""

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

out = sys.argv[1]
marker = sys.argv[3] if sys.argv[2:3] == ["--slow-marker"] else None
spark = SparkSession.builder.appName("zerocode-app").getOrCreate()

spark.range(0, 120).selectExpr("id", "id * 2 AS doubled").write.mode("overwrite").parquet(f"{out}/base")


@F.udf(LongType())
def slow(value):
    if marker and value == 107 and not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(600)
    return value


fresh = spark.range(100, 140, numPartitions=4).select(slow("id").alias("id"))
fresh.write.mode("append").json(f"{out}/events")

spark.read.schema("id long").json(f"{out}/events").write.saveAsTable("events_copy")

report = spark.table("events_copy").join(spark.read.parquet(f"{out}/base"), "id", "left")
report.orderBy("id").coalesce(1).write.mode("overwrite").csv(f"{out}/report")
print("report rows:", report.count())
spark.stop()
