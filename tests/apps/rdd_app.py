"""An unmodified PySpark script that writes with RDD saves only (zero-code mode tests).

    rdd_app.py OUT

Saves numbers as text (OUT/text) and as a pickle file (OUT/pickled), then reads both back and
saves their sum per key as text (OUT/report).
"""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = SparkSession.builder.appName("rdd-app").getOrCreate()
sc = spark.sparkContext

sc.parallelize(range(40), 4).map(lambda n: f"{n % 5},{n}").saveAsTextFile(f"{out}/text")
sc.parallelize(range(40), 4).map(lambda n: (n % 5, n * 10)).saveAsPickleFile(f"{out}/pickled")

text = sc.textFile(f"{out}/text").map(lambda line: tuple(int(x) for x in line.split(",")))
report = text.union(sc.pickleFile(f"{out}/pickled")).reduceByKey(lambda a, b: a + b).sortByKey(numPartitions=1)
report.map(lambda pair: f"{pair[0]} {pair[1]}").saveAsTextFile(f"{out}/report")
print("report rows:", report.count())
spark.stop()
