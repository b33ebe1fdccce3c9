"""A script that trains a model before its write: MLlib's KMeans with a random initialization and
no seed (every run draws another model), its cluster centers printed, the model saved, then the
points written (16 partitions, held for a kill).

    trained_model.py OUT

With ``HOLD_TASKS`` (``FROM:FILE``) the write's tasks of partitions from FROM on wait until FILE
exists (tests/e2e/support.py's ``Hold``): the kill lands in the write by construction.
"""

import os
import sys
import time

from pyspark import TaskContext
from pyspark.mllib.clustering import KMeans
from pyspark.sql import SparkSession

out = sys.argv[1]
HOLD_FROM, _, HOLD_FILE = os.environ.get("HOLD_TASKS", "0:").partition(":")
spark = SparkSession.builder.appName("trained-model").getOrCreate()
sc = spark.sparkContext

points = sc.parallelize([[float(i % 10), float((i * 7) % 13)] for i in range(400)], 4)
model = KMeans.train(points, 4, maxIterations=3, initializationMode="random")
print("centers:", sorted([round(float(x), 6) for x in center] for center in model.clusterCenters))
print("cost:", round(model.computeCost(points), 3))
model.save(sc, f"{out}/model")  # the script's own save: a stage, unlike the copy sparkrecover keeps


def held(row):
    if HOLD_FILE and TaskContext.get().partitionId() >= int(HOLD_FROM):
        deadline = time.monotonic() + 900  # bounded: a worker left behind ends by itself
        while not os.path.exists(HOLD_FILE) and time.monotonic() < deadline:
            time.sleep(0.05)
    return row


frame = spark.createDataFrame(
    points.zipWithIndex().map(lambda p: (p[1], p[0][0], p[0][1])), "id LONG, x DOUBLE, y DOUBLE"
)
frame.repartition(16, "id").rdd.map(held).toDF(frame.schema).write.mode("overwrite").parquet(f"{out}/points")
print("done")
spark.stop()
