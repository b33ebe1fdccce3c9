"""The warm-up application whose driver JVM writes the class archive at exit
(launch/jvm_files/class_archive.py): run under the bootstrap like any application, it loads what most
drivers load at their start and in their first jobs (a session, a shuffle, a Python UDF, Parquet
and JSON writes recorded as stages, a read back), so that their classes are in the archive.

    warmup.py FOLDER
"""

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

folder = sys.argv[1]
spark = SparkSession.builder.appName("sparkrecover-class-archive").getOrCreate()
plus_one = F.udf(lambda value: value + 1, "long")
totals = spark.range(0, 200, numPartitions=2).withColumn("k", F.col("id") % 7).groupBy("k").agg(F.sum("id").alias("s"))
totals.withColumn("u", plus_one("s")).write.mode("overwrite").parquet(os.path.join(folder, "parquet"))
back = spark.read.parquet(os.path.join(folder, "parquet"))
back.orderBy("k").write.mode("overwrite").json(os.path.join(folder, "json"))
print(back.count(), back.collect()[:1])
spark.stop()
