"""An application for bench_executor_archive.py: once every executor has registered, one small job
(an aggregation over two partitions, a task on each executor); then it writes READY and waits for
GO (at most a minute), so that the benchmark reads the executors' CPU while they still live.

    executors_ready.py READY GO
"""

import os
import sys
import time

from pyspark.sql import SparkSession

ready, go = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("bench-executor-archive").getOrCreate()
print("sum", spark.range(0, 100_000, 1, 2).selectExpr("sum(id)").collect()[0][0])
open(ready, "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
spark.stop()
