"""The schema ``spark.createDataFrame(rdd)`` infers (pyspark runs ``rdd.first()`` for it, a Spark
job inside pyspark's own call) recorded in one attempt and reused by the next without that job,
against a real SparkSession; a changed input infers again and says why."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import Row

from sparkrecover.driver.recall import actions, inferred_frames
from sparkrecover.journal import events as ev
from tests.driver.test_recall import attempt, events, resumed
from tests.helpers import jobs_of


@pytest.fixture(autouse=True)
def inference_hooks(hooked):
    actions.install()
    inferred_frames.install()


def rows(spark, folder):
    return spark.sparkContext.textFile(str(folder)).map(json.loads).map(lambda d: Row(**d))


# One line per frame made: the call site is part of the key.
def the_frames(spark, folder):
    made = spark.createDataFrame(rows(spark, folder))
    named = rows(spark, folder).map(lambda r: (r.id, r.day)).toDF(["n", "label"])
    sampled = spark.createDataFrame(rows(spark, folder), samplingRatio=0.5)
    return made, named, sampled


def test_the_inferred_schema_is_reused_without_a_spark_job(spark, tmp_path, orders):
    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, lambda: the_frames(spark, orders))
    assert jobs  # pyspark's rdd.first() and the sampled pass
    recorded = events(rt, ev.ACTION_RECORDED)
    assert [r["kind"] for r in recorded] == ["createDataFrame"] * 3
    assert "samplingRatio=0.5" in recorded[2]["key"]
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: the_frames(spark, orders))
    assert jobs == []
    assert [frame.schema for frame in again] == [frame.schema for frame in first]
    assert [sorted(frame.collect()) for frame in again] == [sorted(frame.collect()) for frame in first]
    assert [r["kind"] for r in events(rt, ev.ACTION_REPLAYED)] == ["createDataFrame"] * 3


def test_a_changed_input_infers_again_and_says_why(spark, tmp_path, orders):
    rt = attempt(tmp_path, spark)
    the_frames(spark, orders)
    (orders / "a.json").write_text("".join(json.dumps({"id": i + 0.5, "day": "d9"}) + "\n" for i in range(30)))
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: the_frames(spark, orders))
    assert jobs
    assert dict(again[0].dtypes)["id"] == "double"  # inferred from the file as it is now
    reasons = [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)]
    assert len(reasons) == 3 and all(reason.startswith("input changed") for reason in reasons)


def test_without_a_runtime_pyspark_infers_as_always(spark, orders):
    frame = spark.createDataFrame(rows(spark, orders))
    assert dict(frame.dtypes) == {"day": "string", "id": "bigint"}
