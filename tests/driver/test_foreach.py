"""foreach and foreachPartition as stages (driver/recording/foreach.py), in process on the shared session: the
stage they journal, and what a plan makes of them: a finished one is skipped, an unfinished one runs
only the partitions the plan does not keep, and keeps none when partition i may hold other rows."""

from __future__ import annotations

import os

import pytest

from sparkrecover.driver.recording import foreach
from tests.helpers import install_runtime, journal, marked_line, zero_code_hooks

PARTS = 8


@pytest.fixture(autouse=True)
def foreach_hooks(request, jvm):
    """The hooks as the bootstrap installs them (the jar loaded: the probe and the partition wrapper)."""
    with zero_code_hooks(request.module.__file__):
        foreach.install()
        yield


def effect_into(folder: str):
    """A foreachPartition function whose side effect is one line per run of a partition, in that
    partition's file: how many rows it saw."""

    def effect(rows):
        from pyspark import TaskContext

        seen = sum(1 for _ in rows)
        with open(os.path.join(folder, str(TaskContext.get().partitionId())), "a") as handle:
            handle.write(f"{seen}\n")

    return effect


def row_effect_into(folder: str):
    """A foreach function: one line per row, in its partition's file."""

    def effect(row):
        from pyspark import TaskContext

        with open(os.path.join(folder, str(TaskContext.get().partitionId())), "a") as handle:
            handle.write(f"{row.id}\n")

    return effect


def each_partition(rdd, effect):
    rdd.foreachPartition(effect)  # rdd-call


def each_row(frame, effect):
    frame.foreach(effect)  # frame-call


def journaled(rt, event_type: str) -> list[dict]:
    """What this attempt journaled of ``event_type`` (earlier attempts share the run directory)."""
    return [r for r in journal(rt, event_type) if r["attempt"] == rt.writer.attempt]


def runs(folder: str) -> dict[int, list[str]]:
    """Partition -> the lines its side effect left."""
    found = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as handle:
            found[int(name)] = handle.read().split()
    return found


def effects(tmp_path, name: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    return str(folder)


def continue_plan(started: dict, write: dict, kept: list[int], shape: str | None = None) -> dict:
    """The plan resume makes for the foreach stage ``started`` whose tasks of ``kept`` finished."""
    return {
        "stages": [
            {
                "stage": started["stage"],
                "decision": "continue",
                "reason": f"{len(kept)}/{write['partitions']} partitions kept (finished in attempt 1)",
                "kind": "foreach",
                "fingerprint": started["fingerprint"],
                "tasks": {"kept": kept, "partitions": write["partitions"], "shape": shape or write["shape"]},
            }
        ]
    }


def first_attempt(spark, tmp_path, rdd):
    """Attempt 1 of the RDD foreachPartition: (its stage.started, its write.started)."""
    rt = install_runtime(tmp_path)
    each_partition(rdd, effect_into(effects(tmp_path, "first")))
    (started,) = journaled(rt, "stage.started")
    (write,) = journaled(rt, "write.started")
    return started, write


def test_a_foreach_partition_is_a_stage_named_by_its_call_site_and_runs_every_partition(spark, tmp_path):
    rt = install_runtime(tmp_path)
    folder = effects(tmp_path, "effects")
    each_partition(spark.sparkContext.parallelize(range(80), PARTS), effect_into(folder))
    assert runs(folder) == {p: ["10"] for p in range(PARTS)}
    (started,) = journaled(rt, "stage.started")
    name = f"test_foreach.py:{marked_line(__file__, 'rdd-call')}#1 foreachPartition RDD"
    assert (started["stage"], started["kind"], started["outputs"], started["verifiable"]) == (
        name,
        "foreach",
        [],
        False,
    )
    (write,) = journaled(rt, "write.started")
    assert (write["stage"], write["partitions"], write["reusable"], write["kept"]) == (name, PARTS, True, [])
    assert [r["stage"] for r in journaled(rt, "stage.committed")] == [name]


def test_an_unfinished_foreach_runs_only_the_partitions_the_plan_does_not_keep(spark, tmp_path):
    rdd = spark.sparkContext.parallelize(range(80), PARTS)
    started, write = first_attempt(spark, tmp_path, rdd)

    rt = install_runtime(tmp_path, continue_plan(started, write, [0, 1, 2, 5]), attempt=2)
    folder = effects(tmp_path, "second")
    each_partition(rdd, effect_into(folder))
    assert runs(folder) == {3: ["10"], 4: ["10"], 6: ["10"], 7: ["10"]}  # each missing partition, whole
    (resumed,) = journaled(rt, "write.started")
    assert (resumed["partitions"], resumed["kept"], resumed["reason"]) == (PARTS, [0, 1, 2, 5], None)
    assert resumed["shape"] == write["shape"]
    assert [r["stage"] for r in journaled(rt, "stage.committed")] == [started["stage"]]


def test_a_foreach_whose_partitions_changed_keeps_none_and_says_why(spark, tmp_path):
    rdd = spark.sparkContext.parallelize(range(80), PARTS)
    started, write = first_attempt(spark, tmp_path, rdd)

    rt = install_runtime(tmp_path, continue_plan(started, write, [0, 1], shape="another shape"), attempt=2)
    folder = effects(tmp_path, "second")
    each_partition(rdd, effect_into(folder))
    assert sorted(runs(folder)) == list(range(PARTS))
    (resumed,) = journaled(rt, "write.started")
    assert resumed["kept"] == [] and resumed["reason"].startswith("its partitions changed since the attempt")


def test_a_finished_foreach_is_skipped(spark, tmp_path):
    rdd = spark.sparkContext.parallelize(range(80), PARTS)
    started, _ = first_attempt(spark, tmp_path, rdd)
    plan = {
        "stages": [
            {
                "stage": started["stage"],
                "decision": "skip",
                "reason": "committed in attempt 1",
                "kind": "foreach",
                "fingerprint": started["fingerprint"],
            }
        ]
    }
    rt = install_runtime(tmp_path, plan, attempt=2)
    folder = effects(tmp_path, "second")
    each_partition(rdd, effect_into(folder))
    assert runs(folder) == {}
    assert [r["reason"] for r in journaled(rt, "stage.skipped")] == ["committed in attempt 1"]


def test_an_indeterminate_rdd_keeps_no_partition(spark, tmp_path):
    """A round-robin repartition of a shuffle's output: which rows land in partition i depends on
    the order the shuffle's blocks arrive in (Spark calls it INDETERMINATE)."""
    sc = spark.sparkContext
    rdd = sc.parallelize(range(80), 4).map(lambda n: (n % 10, n)).reduceByKey(lambda a, b: a + b).repartition(PARTS)
    started, write = first_attempt(spark, tmp_path, rdd)
    assert not write["reusable"] and "INDETERMINATE" in write["reason"]

    rt = install_runtime(tmp_path, continue_plan(started, write, [0, 1]), attempt=2)
    folder = effects(tmp_path, "second")
    each_partition(rdd, effect_into(folder))
    assert sorted(runs(folder)) == list(range(PARTS))
    (resumed,) = journaled(rt, "write.started")
    assert resumed["kept"] == [] and "INDETERMINATE" in resumed["reason"]


def test_a_dataframe_foreach_keeps_partitions_too(spark, tmp_path):
    frame = spark.range(0, 60, 1, 6)
    rt = install_runtime(tmp_path)
    each_row(frame, row_effect_into(effects(tmp_path, "first")))
    (started,) = journaled(rt, "stage.started")
    assert started["stage"] == f"test_foreach.py:{marked_line(__file__, 'frame-call')}#1 foreach DataFrame"
    (write,) = journaled(rt, "write.started")
    assert (write["partitions"], write["reusable"]) == (6, True)

    install_runtime(tmp_path, continue_plan(started, write, [1, 2, 4]), attempt=2)
    folder = effects(tmp_path, "second")
    each_row(frame, row_effect_into(folder))
    assert runs(folder) == {p: [str(n) for n in range(p * 10, p * 10 + 10)] for p in (0, 3, 5)}


def test_outside_submit_foreach_is_pyspark_s_own(spark, tmp_path):
    folder = effects(tmp_path, "plain")
    each_partition(spark.sparkContext.parallelize(range(20), 2), effect_into(folder))
    assert runs(folder) == {0: ["10"], 1: ["10"]}
