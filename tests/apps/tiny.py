"""A small pipeline for end-to-end tests: load a CSV, total it, write a report.

    tiny.py INPUT OUTPUT [--fail-in STAGE] [--die-once MARKER] [--exit-at-end CODE] [--password SECRET]
            [--pause-once MARKER SECONDS]

--fail-in raises in that stage every time; --exit-at-end exits with CODE after the last stage,
outside any stage, every time; --die-once SIGKILLs the driver in "total" the first
time (creating MARKER), like an OOM kill; --password is only there to be redacted;
--pause-once sleeps SECONDS between "load" and "total" the first time (creating MARKER), for a
test to freeze the driver there.
"""

import argparse
import os
import signal
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import sparkrecover as sr

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--fail-in")
parser.add_argument("--die-once")
parser.add_argument("--exit-at-end", type=int)
parser.add_argument("--password")
parser.add_argument("--pause-once", nargs=2)
args = parser.parse_args()
spark = SparkSession.builder.appName("tiny").getOrCreate()


def maybe_fail(stage):
    if args.fail_in == stage:
        raise RuntimeError(f"deliberate failure in {stage}")
    if stage == "total" and args.die_once and not os.path.exists(args.die_once):
        open(args.die_once, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


def load():
    maybe_fail("load")
    return spark.read.schema("key string, amount long").csv(args.input)


rows = sr.checkpoint("load", load)
if args.pause_once and not os.path.exists(args.pause_once[0]):
    open(args.pause_once[0], "w").close()
    time.sleep(float(args.pause_once[1]))


def total():
    maybe_fail("total")
    return rows.groupBy("key").agg(F.sum("amount").alias("amount"))


totals = sr.checkpoint("total", total)


@sr.stage(outputs=[args.output])
def report():
    maybe_fail("report")
    with open(args.output, "w") as handle:
        for row in sorted(totals.collect()):
            handle.write(f"{row.key},{row.amount}\n")


report()
spark.stop()
if args.exit_at_end:
    sys.exit(args.exit_at_end)
