"""One big write, as a nightly job's last step: PARTS partitions of slow rows written as Parquet.

    one_write.py OUT MARKERS PARTS

Each partition leaves a file in MARKERS when it is computed (its first row, through a Python UDF),
so a test can count which partitions an attempt computed.
"""
import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

out, markers, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
ROWS = 100


def work(value):
    if value % ROWS == 0:  # the first row of its partition
        open(os.path.join(markers, f"{value // ROWS}-{time.time_ns()}"), "w").close()
        time.sleep(float(os.environ.get("ONE_WRITE_SLEEP", "0.6")))
    return value * 3


spark = SparkSession.builder.appName("one-write").getOrCreate()
os.makedirs(markers, exist_ok=True)
frame = spark.range(0, parts * ROWS, numPartitions=parts).withColumn("tripled", F.udf(work, LongType())("id"))
frame.write.mode("overwrite").parquet(out)
spark.stop()
