"""Two zero-code writes for the fencing test: a table of five rows, then an append of forty more.

    frozen_append.py OUTPUT MARKER SECONDS

The appended rows go through a UDF and a shuffle; the first time (MARKER absent) the UDF creates
MARKER and sleeps SECONDS in the shuffle's map stage, so a test can freeze the driver inside the
append's Spark job before any of its write tasks ran.
"""

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

output, marker, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
spark = SparkSession.builder.appName("frozen-append").getOrCreate()
# Without adaptive execution the shuffle's map stage runs inside the append's own Spark job (with
# it, probing the write's partitions would run it before the write starts).
spark.conf.set("spark.sql.adaptive.enabled", "false")


@F.udf("long")
def pause_once(value):
    if value == 0:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return value
        time.sleep(seconds)
    return value


spark.range(100, 105, 1, 1).write.mode("overwrite").json(output)
rows = spark.range(0, 40, 1, 2).withColumn("id", pause_once("id")).repartition(2, "id")
rows.write.mode("append").json(output)
spark.stop()
