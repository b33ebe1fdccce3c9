"""An unmodified PySpark script that writes with SQL statements (zero-code mode tests).

    sql_app.py OUT

Creates the table events (CTAS) in the default catalog, inserts into it, copies it into the
folder OUT/copy (INSERT OVERWRITE DIRECTORY), and writes OUT/report from the table.
"""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = SparkSession.builder.appName("sql-app").getOrCreate()

spark.sql("CREATE TABLE events USING parquet AS SELECT id, id * 2 AS doubled FROM range(0, 20)")
spark.sql("INSERT INTO events SELECT id, id * 2 AS doubled FROM range(100, 120)")
spark.sql(f"INSERT OVERWRITE DIRECTORY '{out}/copy' USING json SELECT * FROM events")

report = spark.table("events").groupBy((spark.table("events").id % 3).alias("bucket")).count()
report.orderBy("bucket").coalesce(1).write.mode("overwrite").csv(f"{out}/report")
print("events:", spark.table("events").count())
spark.stop()
