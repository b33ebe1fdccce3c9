"""A trivial application for bench_start.py: count 10 rows and write them.

    count.py OUTPUT [--fail-once MARKER]

--fail-once exits 3 after the write the first time (creating MARKER): the run is left unfinished
with nothing left to do, which a resume then finishes by skipping the write.
"""

import argparse
import os
import sys

from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--fail-once")
args = parser.parse_args()
spark = SparkSession.builder.appName("bench-start").getOrCreate()
rows = spark.range(10)
print("rows", rows.count())
rows.write.mode("overwrite").parquet(args.output)
spark.stop()
if args.fail_once and not os.path.exists(args.fail_once):
    open(args.fail_once, "w").close()
    sys.exit(3)
