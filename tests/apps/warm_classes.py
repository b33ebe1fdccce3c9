"""What most test applications do, once, so that the JVM that runs it archives the classes they
load (tests/jvm_archive.py): a CSV read with schema inference, a Python UDF, a join, an
aggregation, Parquet and JSON writes, a table and SQL, an RDD save.

    warm_classes.py FOLDER
"""

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

folder = sys.argv[1]
spark = SparkSession.builder.appName("warm-classes").config("spark.sql.adaptive.enabled", "true").getOrCreate()
with open(os.path.join(folder, "in.csv"), "w") as handle:
    handle.write("k,v\n" + "".join(f"{i % 7},{i}\n" for i in range(200)))
rows = spark.read.csv(os.path.join(folder, "in.csv"), header=True, inferSchema=True)
plus_one = F.udf(lambda v: v + 1, LongType())
other = spark.range(0, 7).selectExpr("id AS k", "id * 2 AS w")
frame = rows.withColumn("u", plus_one("v")).join(other, "k").groupBy("k").agg(F.sum("u").alias("s"))
frame.write.mode("overwrite").parquet(os.path.join(folder, "parquet"))
frame.orderBy("k").write.mode("overwrite").json(os.path.join(folder, "json"))
spark.read.parquet(os.path.join(folder, "parquet")).write.mode("overwrite").saveAsTable("warm")
spark.sql("INSERT INTO warm SELECT k + 100, s FROM warm")
spark.sparkContext.parallelize(range(10), 2).map(str).saveAsTextFile(os.path.join(folder, "text"))
spark.stop()
