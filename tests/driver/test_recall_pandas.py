"""``toPandas()`` recorded in one attempt and replayed by the next, against a real SparkSession
(driver/recall/pandas_frames.py): without Arrow its rows are kept as collect's are; through Arrow
(``spark.sql.execution.arrow.pyspark.enabled``) the Arrow batches Spark sent are kept as an Arrow IPC
stream and given back to pyspark's own conversion, so the replayed frame equals attempt 1's, dtypes
and cell types included, and no Spark job runs."""

from __future__ import annotations

import pytest

from sparkrecover.journal import events as ev
from sparkrecover.rundir import results, storage
from tests.driver.test_recall import action_hooks, attempt, events, resumed  # noqa: F401  (its autouse fixture)
from tests.helpers import jobs_of

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
ARROW = "spark.sql.execution.arrow.pyspark.enabled"


def arrow_set(spark, value):
    spark.conf.set(ARROW, value)
    try:
        yield
    finally:
        spark.conf.unset(ARROW)  # back to the default: true since Spark 4, false in 3.5


@pytest.fixture
def arrow(spark):
    yield from arrow_set(spark, "true")


@pytest.fixture
def no_arrow(spark):
    yield from arrow_set(spark, "false")


def typed(spark, folder, where="true"):
    """Columns whose pandas form differs by path: arrays (numpy arrays through Arrow, lists
    without), nullable ints (float64 with NaN), dates, decimals, timestamps."""
    frame = spark.read.schema("id LONG, day STRING").json(str(folder))
    return (
        frame.where(where)
        .selectExpr(
            "id",
            "day",
            "id / 3 AS third",
            "IF(id % 4 = 0, NULL, CAST(id AS INT)) AS maybe",
            "DATE'2026-11-28' + CAST(id AS INT) AS on_day",
            "CAST(id AS DECIMAL(10, 2)) AS price",
            "TIMESTAMP'2026-11-28 01:02:03' + make_interval(0, 0, 0, 0, 0, 0, id) AS at",
            "array(id, id + 1) AS pair",
        )
        .orderBy("id")
    )


def to_pandas(spark, folder, where="true"):
    return typed(spark, folder, where).toPandas()


def same_frames(again, first):
    pd.testing.assert_frame_equal(again, first)
    assert list(again.dtypes) == list(first.dtypes)
    assert [type(cell) for cell in again.iloc[1]] == [type(cell) for cell in first.iloc[1]]


def test_to_pandas_through_arrow_is_replayed_from_its_arrow_batches_without_a_spark_job(spark, tmp_path, orders, arrow):
    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    assert jobs and len(first) == 30
    assert type(first["pair"][0]).__name__ == "ndarray"  # Arrow's form: not what collect's rows give
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert recorded["kind"] == "toPandas" and "not_kept" not in recorded
    assert recorded["result"]["path"].endswith(".arrow") and recorded["result"]["rows"] == 30
    kept = storage.read_bytes(results.url_of(rt.run_dir, recorded["result"]["path"]))
    assert pa.ipc.open_stream(kept).read_all().num_rows == 30  # typed data, never a pickle

    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    assert jobs == []
    same_frames(again, first)
    assert [r["kind"] for r in events(rt, ev.ACTION_REPLAYED)] == ["toPandas"]
    assert events(rt, ev.ACTION_RECORDED) == []


def test_an_empty_to_pandas_through_arrow_is_replayed_with_its_columns(spark, tmp_path, orders, arrow):
    rt = attempt(tmp_path, spark)
    first = to_pandas(spark, orders, "id < 0")
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders, "id < 0"))
    assert (jobs, len(again)) == ([], 0)
    pd.testing.assert_frame_equal(again, first)


def test_to_pandas_without_arrow_is_replayed_from_its_rows(spark, tmp_path, orders, no_arrow):
    rt = attempt(tmp_path, spark)
    first = to_pandas(spark, orders)
    assert type(first["pair"][0]) is list
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert recorded["result"]["path"].endswith(".json")
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    assert jobs == []
    same_frames(again, first)


def test_turning_arrow_on_between_attempts_converts_again_and_says_why(spark, tmp_path, orders, no_arrow):
    rt = attempt(tmp_path, spark)
    to_pandas(spark, orders)
    rt = resumed(tmp_path, spark, rt)
    spark.conf.set(ARROW, "true")
    again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    assert jobs and type(again["pair"][0]).__name__ == "ndarray"
    assert [r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)] == ["code changed"]


def test_arrow_batches_over_the_limit_are_not_kept_and_run_again(spark, tmp_path, orders, arrow):
    rt = attempt(tmp_path, spark)
    rt.result_limit = 500
    first = to_pandas(spark, orders)
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert recorded["result"] is None and "over the 500 B limit" in recorded["not_kept"]
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    assert jobs
    same_frames(again, first)


def test_batches_are_kept_before_a_self_destructing_conversion_frees_them(spark, tmp_path, orders, arrow):
    """With selfDestruct pyspark frees each batch's memory as it converts it: what is kept was
    encoded before, and the replayed frame (converted the same way) equals the first."""
    key = "spark.sql.execution.arrow.pyspark.selfDestruct.enabled"
    spark.conf.set(key, "true")
    try:
        rt = attempt(tmp_path, spark)
        first = to_pandas(spark, orders)
        rt = resumed(tmp_path, spark, rt)
        again, jobs = jobs_of(spark, lambda: to_pandas(spark, orders))
    finally:
        spark.conf.unset(key)
    assert jobs == []
    same_frames(again, first)
    assert [r["kind"] for r in events(rt, ev.ACTION_REPLAYED)] == ["toPandas"]


def test_batches_that_cannot_be_encoded_leave_the_frame_to_the_script_and_say_why(
    spark, tmp_path, orders, arrow, monkeypatch
):
    from sparkrecover.driver.recall import pandas_frames

    def refuse(batches, limit):
        raise ValueError("no such type")

    monkeypatch.setattr(pandas_frames, "encode_batches", refuse)
    rt = attempt(tmp_path, spark)
    assert len(to_pandas(spark, orders)) == 30
    (recorded,) = events(rt, ev.ACTION_RECORDED)
    assert recorded["result"] is None
    assert recorded["not_kept"] == "its Arrow batches (ValueError: no such type) cannot be kept"
