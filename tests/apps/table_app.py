"""An unmodified PySpark script that writes tables, changes them with SQL and drops them (zero-code
mode tests).

    table_app.py OUT

Saves the partitioned table t2, overwrites it and inserts into it with SQL, writes OUT/report
from it; saves t3, copies it into OUT/t3; then drops both, so the next run of the script starts
from a clean warehouse as a plain run leaves it.
"""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = SparkSession.builder.appName("table-app").getOrCreate()

spark.range(0, 20).selectExpr("id", "id % 3 AS p").write.partitionBy("p").saveAsTable("t2")
spark.sql("INSERT OVERWRITE TABLE t2 SELECT id, id % 3 AS p FROM range(100, 130)")
spark.sql("INSERT INTO t2 SELECT id, id % 3 AS p FROM range(200, 210)")
t2 = spark.table("t2")
t2.groupBy("p").count().orderBy("p").coalesce(1).write.mode("overwrite").csv(f"{out}/report")

spark.range(0, 5).write.saveAsTable("t3")
spark.table("t3").coalesce(1).write.mode("overwrite").csv(f"{out}/t3")
spark.sql("DROP TABLE t3")
spark.sql("DROP TABLE t2")
print("tables:", sorted(table.name for table in spark.catalog.listTables()))
spark.stop()
