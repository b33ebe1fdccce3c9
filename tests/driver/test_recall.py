"""Actions recorded in one attempt and replayed by the next, against a real SparkSession: the
replayed action returns what the recorded one returned and runs no Spark job; an action whose
inputs, plan or code changed runs again and says why."""

from __future__ import annotations

import collections
import json
import os

import pytest
from pyspark.sql import functions as F

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import action_reuse
from sparkrecover.driver import recall
from sparkrecover.driver.recall import actions
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.rundir import results, storage
from sparkrecover.rundir.plans import Plan
from tests.helpers import install_runtime, jobs_of, journal

HERE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def action_hooks(hooked):
    """Actions hooked as the bootstrap hooks them (the hooks fixture puts every method back)."""
    actions.install()


def attempt(tmp_path, spark, plan=None, attempt=1, conf=None):
    rt = install_runtime(tmp_path, plan, attempt=attempt)
    recall.start(rt, conf if conf is not None else spark.sparkContext.getConf())
    return rt


def resumed(tmp_path, spark, rt, **options):
    """The next attempt's runtime, its plan carrying the actions resume would offer it."""
    recall.stop(rt)
    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    number = max(state.attempts) + 1
    offered = action_reuse.replayable(state, storage.data_stat, results.size_reader(rt.run_dir), **options)
    return attempt(tmp_path, spark, Plan("run1", number, [], actions=offered), attempt=number)


def events(rt, event_type):
    recall.stop(rt)  # the recorder's queue written out
    rt.recorder = recall.recorder.Recorder(rt.writer, rt.run_dir, rt.writer.attempt)
    return [r for r in journal(rt, event_type) if r["attempt"] == rt.writer.attempt]


# One line per action, as a script run again by resume has them: the call site is part of the key.
def the_actions(spark, folder, capsys):
    frame = spark.read.schema("id LONG, day STRING").json(str(folder))
    counted = frame.count()
    latest = frame.orderBy(F.desc("id")).first()
    days = frame.groupBy("day").count().orderBy("day").collect()
    some = frame.orderBy("id").take(3)
    frame.orderBy("id").show(5)
    shown = capsys.readouterr().out
    return counted, latest, days, some, shown


def test_actions_are_recorded_then_replayed_without_a_spark_job(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark)
    first, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs
    recorded = events(rt, ev.ACTION_RECORDED)
    assert [r["kind"] for r in recorded] == ["count", "first", "collect", "take", "show"]
    assert all(r["key"].startswith(f"{HERE}:") and r["result"]["sha256"] for r in recorded)
    assert recorded[0]["summary"] == "count() = 30"
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs == []
    assert again == first  # the show table printed again, character for character
    replayed = events(rt, ev.ACTION_REPLAYED)
    assert [r["kind"] for r in replayed] == ["count", "first", "collect", "take", "show"]
    assert all(r["recorded_in"] == 1 for r in replayed)
    assert events(rt, ev.ACTION_RECORDED) == []


def sampled(spark):
    return spark.range(20_000, numPartitions=2).where(F.rand() < 0.5).count()


def test_a_random_sample_is_replayed_as_the_first_attempt_counted_it(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    first = sampled(spark)
    rt = resumed(tmp_path, spark, rt)
    values = {first}
    for _ in range(3):  # each run of it draws another seed: live, they would differ
        values.add(spark.range(20_000, numPartitions=2).where(F.rand() < 0.5).count())
    assert len(values) > 1
    again, jobs = jobs_of(spark, lambda: sampled(spark))
    assert (again, jobs) == (first, [])


def test_a_changed_input_file_runs_the_action_again_and_says_why(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark)
    the_actions(spark, orders, capsys)
    (orders / "a.json").write_text(json.dumps({"id": 99, "day": "d9"}) + "\n")
    rt = resumed(tmp_path, spark, rt)
    assert all(not entry.replay and entry.reason.startswith("input changed (1 file)") for entry in rt.results.values())
    again, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs and again[0] == 1
    reasons = {r["kind"]: r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)}
    assert reasons["count"] == "input changed (1 file): runs again"


def test_a_file_added_after_planning_is_found_by_the_driver(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark)
    the_actions(spark, orders, capsys)
    rt = resumed(tmp_path, spark, rt)
    assert all(entry.replay for entry in rt.results.values())
    (orders / "b.json").write_text(json.dumps({"id": 100, "day": "d1"}) + "\n")
    again, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs and again[0] == 31
    assert {r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)} == {"input changed"}


def test_a_result_over_the_limit_is_not_kept_and_runs_again(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark)
    rt.result_limit = 200
    the_actions(spark, orders, capsys)
    not_kept = {r["kind"]: r.get("not_kept") for r in events(rt, ev.ACTION_RECORDED)}
    assert not_kept["count"] is None and "over the 200 B limit" in not_kept["collect"]
    rt = resumed(tmp_path, spark, rt)
    assert not rt.results[next(k for k in rt.results if "collect" in k)].replay
    _, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs  # the collect and the show over the limit ran
    assert {r["kind"] for r in events(rt, ev.ACTION_REPLAYED)} >= {"count", "first"}


def typed_rows(spark):
    return spark.sql(
        "SELECT 1 AS id, DATE'2026-11-28' AS day, TIMESTAMP'2026-11-28 01:02:03.456' AS at, "
        "CAST(12.3 AS DECIMAL(10,2)) AS amount, X'00FF' AS blob, CAST('NaN' AS DOUBLE) AS score, "
        "array('a', NULL) AS tags, map(DATE'2026-01-01', 3) AS by_day, named_struct('x', 1.5f, 'y', 'z') AS inner"
    ).collect()


def test_rows_of_every_type_come_back_as_collect_returned_them(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    first = typed_rows(spark)
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: typed_rows(spark))
    assert jobs == []
    assert [type(v) for v in again[0]] == [type(v) for v in first[0]]
    assert repr(again) == repr(first)  # NaN compares unequal to itself: the text says it all
    assert again[0].inner.x == 1.5 and again[0].asDict()["by_day"] == first[0].asDict()["by_day"]


def rdd_results(spark, step):
    pairs = spark.sparkContext.parallelize([("a", 1), ("b", 2), ("a", 3)], 2)
    return (
        pairs.countByKey(),
        pairs.map(lambda kv: kv[1] * step).stats(),
        pairs.map(lambda kv: kv[1]).reduce(lambda a, b: a + b),
        pairs.top(2),
        pairs.count(),
    )


def test_rdd_actions_are_replayed_and_a_changed_function_runs_again(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    counts, stats, total, top, n = rdd_results(spark, 2)
    rt = resumed(tmp_path, spark, rt)
    (counts2, stats2, total2, top2, n2), jobs = jobs_of(spark, lambda: rdd_results(spark, 2))
    assert jobs == []
    assert isinstance(counts2, collections.defaultdict) and counts2 == counts
    assert (stats2.mean(), stats2.count(), total2, top2, n2) == (stats.mean(), stats.count(), total, top, n)
    rt = resumed(tmp_path, spark, rt)
    # The lambda's code is the same, a value it closes over is not: the map's lineage is the same,
    # so the action is replayed as recorded saves are judged (docs/replay.md says so).
    _, jobs = jobs_of(spark, lambda: rdd_results(spark, 3))
    assert jobs == []


def reduce_with(spark, op):
    return spark.sparkContext.parallelize(range(10), 2).reduce(op)


LINE_OF_REDUCE = reduce_with.__code__.co_firstlineno + 1


def test_an_action_given_another_function_runs_again_with_code_changed(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    assert reduce_with(spark, lambda a, b: a + b) == 45
    rt = resumed(tmp_path, spark, rt)
    value, jobs = jobs_of(spark, lambda: reduce_with(spark, lambda a, b: max(a, b)))
    assert (value, bool(jobs)) == (9, True)
    (record,) = events(rt, ev.ACTION_RECORDED)
    assert record["ran_because"] == "code changed"


def firsts(frame):
    return frame.first(), frame.head(), frame.head(2), frame.isEmpty(), frame.tail(1)


def test_an_action_pyspark_makes_of_other_actions_is_recorded_once(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    frame = spark.range(10, numPartitions=2)
    first = firsts(frame)
    assert [r["kind"] for r in events(rt, ev.ACTION_RECORDED)] == ["first", "head", "head", "isEmpty", "tail"]
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: firsts(frame))
    assert (again, jobs) == (first, [])


def iterate(frame):
    return [row.id for row in frame.toLocalIterator()]


def test_a_local_iterator_read_to_its_end_is_replayed(spark, tmp_path):
    rt = attempt(tmp_path, spark)
    frame = spark.range(7, numPartitions=3)
    first = iterate(frame)
    rt = resumed(tmp_path, spark, rt)
    again, jobs = jobs_of(spark, lambda: iterate(frame))
    assert (again, jobs) == (first, [])


def test_a_run_whose_conf_turns_replay_off_records_nothing(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark, conf={recall.REPLAY_CONF: "false"})
    the_actions(spark, orders, capsys)
    assert rt.recorder is None
    assert journal(rt, ev.ACTION_RECORDED) == []


def test_no_replay_offers_nothing_and_every_action_runs(spark, tmp_path, orders, capsys):
    rt = attempt(tmp_path, spark)
    the_actions(spark, orders, capsys)
    rt = resumed(tmp_path, spark, rt, replay=False)
    _, jobs = jobs_of(spark, lambda: the_actions(spark, orders, capsys))
    assert jobs
    assert {r["ran_because"] for r in events(rt, ev.ACTION_RECORDED)} == {"--no-replay: runs again"}


def count_of(frame):
    return frame.count()


def grouped(frame):
    return frame.groupBy("bucket").count().orderBy("bucket").collect()


def test_an_action_over_a_cache_no_job_filled_is_replayed_too(spark, tmp_path):
    """The count that filled the cache in attempt 1 is replayed: the next live query fills it, and
    the shuffles of the cached plan keep their identity whichever query fills it (docs/shuffles.md;
    tests/e2e/test_new_user_script.py proves their map outputs reused)."""
    rt = attempt(tmp_path, spark)
    frame = spark.range(40, numPartitions=2).selectExpr("id", "id % 3 AS bucket").cache()
    try:
        first = count_of(frame), grouped(frame)
        frame.unpersist(blocking=True)
        frame.cache()  # the resumed driver's cache: declared, filled by no job yet
        rt = resumed(tmp_path, spark, rt)
        count, jobs = jobs_of(spark, lambda: count_of(frame))
        assert (count, jobs) == (first[0], [])
        rows, jobs = jobs_of(spark, lambda: grouped(frame))
    finally:
        frame.unpersist()
    assert (rows, jobs) == (first[1], [])
    assert events(rt, ev.ACTION_RECORDED) == []


def test_an_action_leaves_the_script_free_to_cache_its_frame(spark, tmp_path):
    """The fingerprint lists input files through a view: Spark keeps the first optimized plan a
    DataFrame makes, and asking the script's own would leave it blind to its later cache()."""
    attempt(tmp_path, spark)
    frame = spark.range(10, numPartitions=2).selectExpr("id")
    frame.count()  # pyspark's count plans a DataFrame of its own
    frame.cache()
    try:
        assert "InMemoryRelation" in frame._jdf.queryExecution().optimizedPlan().toString()
    finally:
        frame.unpersist()


def test_a_failing_show_raises_from_pyspark_own_show(spark, tmp_path):
    attempt(tmp_path, spark)
    frame = spark.range(3, numPartitions=1).selectExpr("raise_error(CAST(id AS STRING)) AS x")
    with pytest.raises(Exception, match="0") as failed:
        frame.show()
    frames = [(entry.name, str(entry.path)) for entry in failed.traceback]
    assert next(name for name, path in frames if f"{os.sep}pyspark{os.sep}" in path) == "show", frames


def test_an_rdd_action_job_is_named_after_the_user_call(spark, tmp_path):
    attempt(tmp_path, spark)
    value, jobs = jobs_of(spark, lambda: reduce_with(spark, lambda a, b: a + b))
    tracker = spark.sparkContext.statusTracker()
    names = {tracker.getStageInfo(stage).name for job in jobs for stage in tracker.getJobInfo(job).stageIds}
    assert value == 45 and names == {f"reduce at {os.path.abspath(__file__)}:{LINE_OF_REDUCE}"}


def test_an_rdd_action_over_a_folder_sees_a_file_rewritten_inside_it(spark, tmp_path, orders):
    """The folder's own size and time stay when a file in it is rewritten: its files are listed."""

    def lines():
        return spark.sparkContext.textFile(str(orders)).count()  # one call site in both attempts

    rt = attempt(tmp_path, spark)
    lines()
    (orders / "a.json").write_text(json.dumps({"id": 99, "day": "d9"}) + "\n")
    rt = resumed(tmp_path, spark, rt)
    assert [entry.replay for entry in rt.results.values()] == [False]  # seen before the launch
    counted, jobs = jobs_of(spark, lines)
    assert (counted, bool(jobs)) == (1, True)
