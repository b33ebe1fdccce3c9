"""Demo ETL: orders -> clean -> daily totals -> a published report.

    spark-submit pipeline.py OUTPUT_DIR [--rows N] [--pause SECONDS]

Runs the same under plain spark-submit and under ``sparkrecover submit``. ``--pause`` makes each
stage take at least that long, so that a demo can kill the driver in the middle of one.
"""

import argparse
import os
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import sparkrecover as sr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args()
    spark = SparkSession.builder.appName("sparkrecover-demo").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    pause = args.pause

    @F.udf("long")
    def wait_at_row_one(value):
        # Spark-side, so that a stage is slow only when it really computes: a resumed run that
        # skips the stage does not wait.
        if value == 1:
            time.sleep(pause)
        return value

    def slowly(frame):
        return frame.withColumn("id", wait_at_row_one("id")) if pause else frame

    orders = sr.checkpoint(
        "orders",
        lambda: slowly(
            spark.range(args.rows, numPartitions=4)
            .withColumn("day", (F.col("id") % 30).cast("int"))
            .withColumn("amount", ((F.col("id") * 7919) % 1000 - 100).cast("long"))
        ),
    )
    clean = sr.checkpoint("clean", lambda: slowly(orders).where("amount > 0"))
    daily = sr.checkpoint(
        "daily", lambda: slowly(clean).groupBy("day").agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    )
    report = os.path.join(args.output, "report.txt")

    @sr.stage(outputs=[report])
    def publish():
        rows = sorted(daily.collect())
        os.makedirs(args.output, exist_ok=True)
        with open(report, "w") as handle:
            handle.write("day\ttotal\torders\n")
            for row in rows:
                handle.write(f"{row.day}\t{row.total}\t{row.orders}\n")

    publish()
    print(f"report written to {report}")
    spark.stop()


if __name__ == "__main__":
    main()
