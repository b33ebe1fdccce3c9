"""An application that fails, for comparing tracebacks under plain spark-submit and under submit.

failing.py raise OUT    a function called at top level raises (outside any stage)
failing.py write OUT    a DataFrameWriter write (a zero-code stage under submit) fails: OUT exists
failing.py chained OUT  that write fails and the script raises another exception from it
"""

import sys

from pyspark.sql import SparkSession

mode, out = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("failing").getOrCreate()


def check(rows):
    if rows:
        raise ValueError(f"deliberate failure with {rows} rows")


if mode == "raise":
    check(spark.range(3).count())
elif mode == "chained":
    try:
        spark.range(3).write.mode("error").parquet(out)
    except Exception as error:
        raise RuntimeError("could not write the output") from error
else:
    spark.range(3).write.mode("error").parquet(out)
