"""A clean run whose work is one collect of ROWS rows (three columns) to the driver.

collect_rows.py ROWS
"""

import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("collect-rows").getOrCreate()
rows = (
    spark.range(int(sys.argv[1]), numPartitions=4)
    .selectExpr("id", "id * 2 AS twice", "CAST(id AS STRING) AS s")
    .collect()
)
print("collected", len(rows))
spark.stop()
