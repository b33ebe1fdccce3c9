"""A task-heavy job for bench_overhead.py: one Spark stage of N tiny tasks (JVM only, no shuffle).

spark-submit tasks.py N
"""

import sys

from pyspark.sql import SparkSession

import sparkrecover as sr

spark = SparkSession.builder.appName("bench-overhead").getOrCreate()
tasks = int(sys.argv[1])
# Under sparkrecover this is a pipeline stage, so its Spark events carry an attribution; under
# plain spark-submit sr.stage just runs the function.
sr.stage("tasks", lambda: spark.range(tasks, numPartitions=tasks).write.format("noop").mode("overwrite").save())
spark.stop()
