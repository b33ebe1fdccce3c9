"""The Python API against a real local SparkSession, with a real journal on disk."""

from __future__ import annotations

import os

import pytest

import sparkrecover as sr
from sparkrecover.driver.process import runtime
from sparkrecover.driver.process.runtime import Runtime
from sparkrecover.errors import UsageError
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.planning.storage_evidence import StorageEvidence
from tests.helpers import install_runtime, journal, numbers


def test_checkpoint_writes_commits_and_reads_back(spark, tmp_path):
    rt = install_runtime(tmp_path)
    frame = sr.checkpoint("numbers", lambda: numbers(spark))
    target = os.path.join(rt.run_dir, "checkpoints", "numbers")
    assert sorted(r.id for r in frame.collect()) == list(range(100))
    assert all(path.startswith("file://" + target) for path in frame.inputFiles())
    (started,) = journal(rt, ev.STAGE_STARTED)
    (committed,) = journal(rt, ev.STAGE_COMMITTED)
    assert started["stage"] == committed["stage"] == "numbers"
    assert started["kind"] == "checkpoint" and started["outputs"] == [target]
    assert started["seq"] < committed["seq"]
    (output,) = committed["manifest"]
    on_disk = {
        name: os.path.getsize(os.path.join(target, name)) for name in os.listdir(target) if name.startswith("part-")
    }
    assert dict((name, size) for name, size in output["files"]) == on_disk
    assert output["success"] is True and output["bytes"] == sum(on_disk.values())
    assert '"bucket"' in committed["schema"]


def test_upstream_edges_come_from_what_a_checkpoint_reads(spark, tmp_path):
    rt = install_runtime(tmp_path)
    first = sr.checkpoint("first", lambda: numbers(spark))
    sr.checkpoint("second", lambda: first.where("bucket = 3"))
    sr.checkpoint("unrelated", lambda: numbers(spark, 10))
    started = {r["stage"]: r["upstream"] for r in journal(rt, ev.STAGE_STARTED)}
    assert started == {"first": [], "second": ["first"], "unrelated": []}


def test_stage_property_attributes_jobs_while_building(spark, tmp_path):
    install_runtime(tmp_path)
    seen = []

    def build():
        seen.append(spark.sparkContext.getLocalProperty(runtime.STAGE_PROPERTY))
        return numbers(spark)

    sr.checkpoint("attributed", build)
    assert seen == ["attributed"]
    assert spark.sparkContext.getLocalProperty(runtime.STAGE_PROPERTY) is None


def resume_runtime(tmp_path, rt: Runtime) -> Runtime:
    """The next attempt's runtime, with the plan the real planner makes from the journal so far."""
    from sparkrecover.core.fold.runstate import RunState
    from sparkrecover.core.verdicts import planner

    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    decisions = planner.make_plan(state, StorageEvidence(rt.run_dir))
    attempt = max(state.attempts) + 1
    return install_runtime(
        tmp_path, planner.plan_of(planner.StageDecisions("run1", attempt, decisions)), attempt=attempt
    )


def test_skip_reads_the_checkpoint_back_and_computes_nothing(spark, tmp_path):
    rt = install_runtime(tmp_path)
    sr.checkpoint("numbers", lambda: numbers(spark))
    rt2 = resume_runtime(tmp_path, rt)
    frame = sr.checkpoint("numbers", lambda: numbers(spark))
    target = os.path.join(rt.run_dir, "checkpoints", "numbers")
    assert all(path.startswith("file://" + target) for path in frame.inputFiles())
    assert sorted(r.id for r in frame.collect()) == list(range(100))
    second = [r for r in journal(rt2) if r["attempt"] == 2]
    assert [(r["type"], r.get("reason")) for r in second if r["type"].startswith("stage.")] == [
        ("stage.skipped", "committed in attempt 1, output verified")
    ]


def test_changed_code_invalidates_the_stage_and_its_downstream(spark, tmp_path):
    rt = install_runtime(tmp_path)
    first = sr.checkpoint("first", lambda: numbers(spark))
    middle = sr.checkpoint("middle", lambda: first.where("bucket = 3"))
    sr.checkpoint("last", lambda: middle.groupBy("bucket").count())
    rt2 = resume_runtime(tmp_path, rt)
    first = sr.checkpoint("first", lambda: numbers(spark))
    middle = sr.checkpoint("middle", lambda: first.where("bucket = 4"))
    last = sr.checkpoint("last", lambda: middle.groupBy("bucket").count())
    assert [tuple(r) for r in last.collect()] == [(4, 14)]
    second = [r for r in journal(rt2) if r["attempt"] == 2 and r["type"].startswith("stage.")]
    assert [(r["type"], r["stage"], r.get("reason")) for r in second if r["type"] != "stage.started"] == [
        ("stage.skipped", "first", "committed in attempt 1, output verified"),
        ("stage.invalidated", "middle", "code changed"),
        ("stage.committed", "middle", None),
        ("stage.invalidated", "last", "upstream changed (middle)"),
        ("stage.committed", "last", None),
    ]


def test_version_and_input_changes_are_named(spark, tmp_path):
    source = tmp_path / "input.json"
    source.write_text('{"a": 1}\n{"a": 2}\n')
    rt = install_runtime(tmp_path)
    sr.checkpoint("versioned", lambda: numbers(spark, 10), version="1")
    sr.checkpoint("reads", lambda: spark.read.schema("a long").json(str(source)))
    source.write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n')
    rt2 = resume_runtime(tmp_path, rt)
    assert [(s.stage, s.decision, s.reason.split(":")[0]) for s in rt2.decisions.values()] == [
        ("versioned", "skip", "committed in attempt 1, output verified"),
        ("reads", "rerun", "input changed"),
    ]
    sr.checkpoint("versioned", lambda: numbers(spark, 10), version="2")
    assert sr.checkpoint("reads", lambda: spark.read.schema("a long").json(str(source))).count() == 3
    invalidated = [(r["stage"], r["reason"]) for r in journal(rt2, ev.STAGE_INVALIDATED)]
    assert invalidated == [("versioned", "version changed")]


def test_lost_checkpoint_returns_its_lineage_unwritten(spark, tmp_path):
    plan = {
        "stages": [
            {
                "stage": "gone",
                "decision": "lost",
                "reason": "output lost: x is gone",
                "committed": {"attempt": 1, "format": "parquet", "schema": None, "paths": ["file:/nowhere"]},
            }
        ]
    }
    rt = install_runtime(tmp_path, plan, attempt=2)
    frame = sr.checkpoint("gone", lambda: numbers(spark))
    assert frame.count() == 100
    assert not os.path.exists(os.path.join(rt.run_dir, "checkpoints", "gone"))
    assert [r["reason"] for r in journal(rt, ev.STAGE_SKIPPED)] == ["output lost: x is gone"]


def test_failed_build_is_journaled_and_raised(spark, tmp_path):
    rt = install_runtime(tmp_path)
    with pytest.raises(ZeroDivisionError):
        sr.checkpoint("broken", lambda: 1 / 0)
    (failed,) = journal(rt, ev.STAGE_FAILED)
    assert failed["stage"] == "broken" and failed["error_type"] == "ZeroDivisionError"
    assert "division by zero" in failed["error"]
    assert spark.sparkContext.getLocalProperty(runtime.STAGE_PROPERTY) is None


def test_duplicate_stage_names_are_an_error(spark, tmp_path):
    install_runtime(tmp_path)
    sr.checkpoint("twice", lambda: numbers(spark, 5))
    with pytest.raises(UsageError, match="used twice"):
        sr.checkpoint("twice", lambda: numbers(spark, 5))


@pytest.mark.parametrize("name", ["", "a/b", " padded", "x" * 201, None])
def test_invalid_stage_names_are_refused(name):
    with pytest.raises(UsageError):
        sr.checkpoint(name, lambda: None)


def test_stage_function_records_its_outputs_and_cleans_a_partial_write(spark, tmp_path):
    target = tmp_path / "report"
    target.mkdir()
    (target / "part-old.txt").write_text("kept\n")
    rt = install_runtime(tmp_path)
    source = sr.checkpoint("source", lambda: numbers(spark))

    @sr.stage(outputs=[str(target)])
    def publish():
        (target / "part-new.txt").write_text(f"{source.count()}\n")
        return "done"

    assert publish() == "done"
    (started,) = [r for r in journal(rt, ev.STAGE_STARTED) if r["stage"] == "publish"]
    (committed,) = [r for r in journal(rt, ev.STAGE_COMMITTED) if r["stage"] == "publish"]
    assert started["upstream"] == ["source"]
    assert [f[0] for f in started["before"][0]["files"]] == ["part-old.txt"]
    assert sorted(f[0] for f in committed["manifest"][0]["files"]) == ["part-new.txt", "part-old.txt"]
    # A rerun first removes what the earlier write added, so nothing is there twice.
    (target / "part-partial.txt").write_text("half")
    plan = {
        "stages": [
            {
                "stage": "publish",
                "decision": "run",
                "reason": "started in attempt 1 but not committed",
                "restore": started["before"],
            }
        ]
    }
    install_runtime(tmp_path, plan, attempt=2)
    ran = []
    sr.stage("publish", lambda: ran.append(sorted(os.listdir(target))), outputs=[str(target)])
    assert ran == [["part-old.txt"]]


def test_skipped_stage_function_is_not_called(tmp_path, spark):
    plan = {"stages": [{"stage": "publish", "decision": "skip", "reason": "committed in attempt 1, output verified"}]}
    rt = install_runtime(tmp_path, plan, attempt=2)

    @sr.stage
    def publish():
        raise AssertionError("called")

    assert publish() is None
    assert [r["stage"] for r in journal(rt, ev.STAGE_SKIPPED)] == ["publish"]


def test_outside_submit_everything_runs_and_nothing_is_recorded(spark, tmp_path):
    assert runtime.current() is None
    built = numbers(spark)
    assert sr.checkpoint("plain", built) is built
    explicit = sr.checkpoint("explicit", lambda: numbers(spark, 10), path=str(tmp_path / "explicit"))
    assert explicit.count() == 10 and (tmp_path / "explicit" / "_SUCCESS").exists()
    calls = []

    @sr.stage(outputs=[str(tmp_path / "nowhere")])
    def side_effect(x):
        calls.append(x)
        return x * 2

    assert side_effect(21) == 42 and calls == [21]
    assert not (tmp_path / ".sparkrecover").exists()
