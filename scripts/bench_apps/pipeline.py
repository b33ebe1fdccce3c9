"""Four similar stages for bench_recovery.py: each reads its predecessor's checkpoint, hashes every
row ``--rounds`` times and writes its own checkpoint (parquet).

    spark-submit pipeline.py OUTPUT [--rows N] [--rounds R] [--timings FILE]

``--timings`` records each stage's wall time as it finishes (JSON), so that a run killed half
way still tells how long the finished stages took.
"""
import argparse
import json
import os
import time

from pyspark.sql import SparkSession, functions as F

import sparkrecover as sr

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--rows", type=int, default=2_000_000)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--timings")
args = parser.parse_args()
spark = SparkSession.builder.appName("bench-recovery").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
timings = {}


def hashed(frame, salt):
    payload = F.col("payload")
    for round_ in range(args.rounds):
        payload = F.sha2(F.concat_ws(":", payload, F.lit(f"{salt}.{round_}")), 256)
    return frame.select("id", payload.alias("payload"))


frame = spark.range(args.rows, numPartitions=4).select("id", F.col("id").cast("string").alias("payload"))
for number in range(1, 5):
    name = f"s{number}"
    started = time.monotonic()
    frame = sr.checkpoint(name, lambda frame=frame, number=number: hashed(frame, number),
                          path=os.path.join(args.output, name))
    timings[name] = round(time.monotonic() - started, 3)
    if args.timings:
        with open(args.timings, "w") as handle:
            json.dump(timings, handle)
print(f"{frame.count()} rows in {os.path.join(args.output, 's4')}")
spark.stop()
