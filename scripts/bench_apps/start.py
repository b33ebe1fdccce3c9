"""One driver start for bench_recovery.py: a SparkSession up and down, nothing else."""

from pyspark.sql import SparkSession

SparkSession.builder.appName("bench-driver-start").getOrCreate().stop()
