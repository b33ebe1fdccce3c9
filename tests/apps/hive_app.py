"""An unmodified PySpark script with Hive support that writes tables with SQL and DataFrames
(zero-code mode tests). Its metastore (embedded Derby: metastore_db/) and warehouse
(spark-warehouse/) land in the driver's working folder, where they survive a killed driver.

    hive_app.py OUT

events (a data source table) ends with 400 rows, ids 0-399, each once: 100 from CREATE TABLE AS,
100 from an SQL INSERT INTO, 200 from DataFrameWriter.insertInto. legacy (a Hive-format table,
STORED AS parquet) ends with 100 rows. OUT/report holds one line per table: name, rows, distinct ids.
"""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = SparkSession.builder.appName("hive-app").enableHiveSupport().getOrCreate()

spark.sql("CREATE TABLE events USING parquet AS SELECT id, id * 2 AS doubled FROM range(0, 100)")
# Each row waits 40 ms (Thread.sleep, through SQL's java_method): the job of this CREATE TABLE AS
# lasts about a second, so a test can kill the driver while it runs.
spark.sql(  # CREATE TABLE legacy (the tests find this call's line by this comment)
    "CREATE TABLE legacy STORED AS parquet AS SELECT id FROM range(0, 50) "
    "WHERE coalesce(java_method('java.lang.Thread', 'sleep', 40L), 'slept') IS NOT NULL"
)
spark.sql("INSERT INTO legacy SELECT id FROM range(50, 100)")
spark.sql("INSERT INTO events SELECT id, id * 2 AS doubled FROM range(100, 200)")
spark.range(200, 400).selectExpr("id", "id * 2 AS doubled").write.insertInto("events")

report = spark.sql(
    "SELECT 'events' AS name, count(*) AS n, count(DISTINCT id) AS ids FROM events "
    "UNION ALL SELECT 'legacy', count(*), count(DISTINCT id) FROM legacy"
)
report.orderBy("name").coalesce(1).write.mode("overwrite").csv(f"{out}/report")
print("events:", spark.table("events").count(), "legacy:", spark.table("legacy").count())
spark.stop()
