"""A foreachPartition whose side effect is a line in one file per partition, as a sink that writes
to a database from each partition would.

    foreach_app.py OUT GATE PARTS HELD_FROM

Partition i appends ``<driver pid> <rows>`` to ``OUT/part-<i>``: a partition whose side effect ran
twice has two lines, one per driver. Partitions from HELD_FROM on, once their line is written, wait
for the file GATE before they finish: a test kills the driver while they wait, at a moment it
chooses (their tasks are running, every earlier one has finished).
"""

import os
import sys
import time

from pyspark.sql import SparkSession

out, gate, parts, held_from = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
DRIVER = os.getpid()

spark = SparkSession.builder.appName("foreach-app").getOrCreate()
os.makedirs(out, exist_ok=True)


def side_effect(rows):
    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()
    count = sum(1 for _ in rows)
    with open(os.path.join(out, f"part-{partition:03d}"), "a") as handle:
        handle.write(f"{DRIVER} {count}\n")
    while partition >= held_from and not os.path.exists(gate):
        time.sleep(0.05)


spark.sparkContext.parallelize(range(parts * 10), parts).foreachPartition(side_effect)
spark.stop()
