"""Four similar stages for bench_recovery.py: each reads its predecessor's checkpoint, hashes every
row ``--rounds`` times and writes its own checkpoint (parquet).

    spark-submit pipeline.py OUTPUT [--rows N] [--rounds R] [--timings FILE] [--alone K --input DIR]

``--timings`` records each stage's wall time as it finishes (JSON), so that a run killed half
way still tells how long the finished stages took. ``--alone K`` runs stage K by itself, reading
stage K-1's checkpoint from an earlier run's OUTPUT given as ``--input``: what an ideal recovery
of stage K would run.
"""

import argparse
import json
import os
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import sparkrecover as sr

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--rows", type=int, default=6_000_000)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--timings")
parser.add_argument("--alone", type=int)
parser.add_argument("--input")
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
first = 1
if args.alone:
    first = args.alone
    frame = spark.read.parquet(os.path.join(args.input, f"s{first - 1}"))
for number in range(first, 5 if not args.alone else first + 1):
    name = f"s{number}"
    started = time.monotonic()
    frame = sr.checkpoint(
        name, lambda frame=frame, number=number: hashed(frame, number), path=os.path.join(args.output, name)
    )
    timings[name] = round(time.monotonic() - started, 3)
    if args.timings:
        with open(args.timings, "w") as handle:
            json.dump(timings, handle)
print(f"{frame.count()} rows in {os.path.join(args.output, f's{number}')}")
spark.stop()
