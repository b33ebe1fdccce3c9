"""One big write, as a nightly job's last step: PARTS partitions of slow rows.

    one_write.py OUT MARKERS PARTS [VARIANT]

VARIANT: ``overwrite`` (default: Parquet, mode overwrite), ``json`` (the same as JSON), ``append`` (appends to OUT),
``partitioned`` (partitionBy a column), ``shuffled`` (after a round-robin repartition, whose input
Spark sorts first: UNORDERED), ``checkpoint`` (through ``sr.checkpoint(..., path=OUT)``), ``stage`` (inside
an ``@sr.stage(outputs=[OUT])`` function), ``pipeline`` (a small checkpoint first, the write as the
checkpoint ``numbers``, then a ``publish`` stage: a run whose report has several stages),
``append-then-overwrite`` (1,000 rows appended to ``OUT-log`` first, then the overwrite: a
restart that appended again would leave 2,000).

Each partition leaves a file in MARKERS when it is computed (its first row, through a Python UDF),
so a test can count which partitions an attempt computed.

The environment shapes the partitions: ``ONE_WRITE_SLEEP`` (seconds a partition sleeps, 0.6),
``ONE_WRITE_ROWS`` (rows per partition, 100), ``ONE_WRITE_SLEEP_ROW`` (the row of its partition at
which it sleeps, 0: the first), ``ONE_WRITE_SLEEP_FROM`` (the first partition that sleeps, 0),
``ONE_WRITE_PAYLOAD`` (``BYTES:FROM``: from partition FROM on, the
first 100 rows carry BYTES of incompressible bytes derived from their id, so that a task has written
megabytes before it sleeps at row 100: on S3 a multipart upload is then open while it sleeps),
``HOLD_TASKS`` (``FROM:FILE``: partitions from FROM on wait at that row, after their sleep, until FILE
exists (the shuffled variant's tasks hold after the shuffle): a test holds tasks in flight for its
kill, tests/e2e/support.py's ``Hold``).
"""

import hashlib
import os
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType

import sparkrecover as sr

out, markers, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
variant = sys.argv[4] if len(sys.argv) > 4 else "overwrite"
ROWS = int(os.environ.get("ONE_WRITE_ROWS", "100"))
SLEEP_ROW = int(os.environ.get("ONE_WRITE_SLEEP_ROW", "0"))
SLEEP_FROM = int(os.environ.get("ONE_WRITE_SLEEP_FROM", "0"))
PAYLOAD, PAYLOAD_FROM = (int(n) for n in os.environ.get("ONE_WRITE_PAYLOAD", "0:0").split(":"))
HOLD_FROM, _, HOLD_FILE = os.environ.get("HOLD_TASKS", "0:").partition(":")


def work(value):
    if value % ROWS == 0:  # the first row of its partition
        open(os.path.join(markers, f"{value // ROWS}-{time.time_ns()}"), "w").close()
    if value % ROWS == SLEEP_ROW and value // ROWS >= SLEEP_FROM:
        time.sleep(float(os.environ.get("ONE_WRITE_SLEEP", "0.6")))
    if HOLD_FILE and variant != "shuffled" and value % ROWS == SLEEP_ROW and value // ROWS >= int(HOLD_FROM):
        hold()
    return value * 3


def held_after_the_shuffle(value):
    """The shuffled variant's tasks hold in its write, after the shuffle (TaskContext's partition:
    the rows are round-robin there)."""
    if HOLD_FILE and TaskContext.get().partitionId() >= int(HOLD_FROM):
        hold()
    return value


def hold():
    """Wait for the test's signal (a bounded wait: a worker left behind ends by itself)."""
    deadline = time.monotonic() + 900
    while not os.path.exists(HOLD_FILE) and time.monotonic() < deadline:
        time.sleep(0.05)


def payload(value):
    """What a test can compute again: ``expected_rows`` in tests/e2e/test_task_resume_stores.py."""
    if value // ROWS < PAYLOAD_FROM or value % ROWS >= 100:
        return b""
    return hashlib.shake_256(str(value).encode()).digest(PAYLOAD)


spark = SparkSession.builder.appName("one-write").getOrCreate()


# Pickled UDFs, whatever the Spark version and packages: their rows stream out one by one, so a
# task held at one row has written the rows before it (a large file in flight). Spark 4 runs a UDF
# through Arrow wherever the driver can import pandas and pyarrow, in batches of 10,000 rows.
def row_udf(function, kind):
    return F.udf(function, kind, useArrow=False)


os.makedirs(markers, exist_ok=True)
frame = spark.range(0, parts * ROWS, numPartitions=parts).withColumn("tripled", row_udf(work, LongType())("id"))
if PAYLOAD:
    frame = frame.withColumn("payload", row_udf(payload, BinaryType())("id"))
if os.environ.get("ONE_WRITE_NOTE"):  # another query: what a code change does to the plan
    frame = frame.withColumn("note", F.lit(os.environ["ONE_WRITE_NOTE"]))
if variant == "overwrite":
    frame.write.mode("overwrite").parquet(out)
elif variant == "json":
    frame.write.mode("overwrite").json(out)
elif variant == "append-then-overwrite":
    spark.range(0, 1000, numPartitions=2).write.mode("append").parquet(out + "-log")
    frame.write.mode("overwrite").parquet(out)
elif variant == "append":
    frame.write.mode("append").parquet(out)
elif variant == "partitioned":
    frame.withColumn("bucket", F.col("id") % 3).write.mode("overwrite").partitionBy("bucket").parquet(out)
elif variant == "shuffled":
    shuffled = frame.repartition(parts)
    shuffled.withColumn("tripled", row_udf(held_after_the_shuffle, LongType())("tripled")).write.mode(
        "overwrite"
    ).parquet(out)
elif variant == "checkpoint":
    sr.checkpoint("numbers", frame, path=out)
elif variant == "stage":

    @sr.stage(outputs=[out])
    def publish():
        frame.write.mode("overwrite").parquet(out)

    publish()
elif variant == "pipeline":
    sr.checkpoint("orders", spark.range(0, 1000, numPartitions=2))
    numbers = sr.checkpoint("numbers", frame, path=out)

    @sr.stage(outputs=[out + "-count.txt"])
    def publish():
        with open(out + "-count.txt", "w") as handle:
            handle.write(f"{numbers.count()}\n")

    publish()
spark.stop()
