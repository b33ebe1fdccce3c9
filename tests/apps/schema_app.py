"""An ETL step that reads JSON without a schema (Spark infers it with a pass over the files).

    schema_app.py RAW OUT

It writes the events as Parquet (OUT/clean), pauses, then writes a count per kind (OUT/report):
a test kills it in the pause and resumes it.
"""

import sys
import time

from pyspark.sql import SparkSession

raw, out = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("schema-app").getOrCreate()
events = spark.read.json(raw)  # the inferring read
events.write.mode("overwrite").parquet(f"{out}/clean")
time.sleep(3)  # room for the kill between the two writes
events.groupBy("kind").count().orderBy("kind").write.mode("overwrite").json(f"{out}/report")
spark.stop()
