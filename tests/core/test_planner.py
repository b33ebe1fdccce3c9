"""The planner on synthetic journals (no Spark): what resume skips, reruns and reports lost."""

from __future__ import annotations

import os

import pytest

from sparkrecover.errors import UsageError
from tests.journals import make_output


def test_committed_and_intact_is_skipped(run):
    run.done("a").end(0)
    assert run.plan() == {"a": ("skip", "committed in attempt 1, output verified")}


def test_started_but_not_committed_runs(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    assert run.plan()["b"] == ("run", "started in attempt 1 but not committed")


def test_failed_stage_runs_with_its_error(run):
    run.done("a").started("b", ["a"]).failed("b", "Py4JJavaError: boom\n  at line 2").end(1)
    assert run.plan() == {
        "a": ("skip", "committed in attempt 1, output verified"),
        "b": ("run", "failed in attempt 1: Py4JJavaError: boom"),
    }


def test_lost_output_that_nothing_needs_is_reported_not_rerun(run):
    run.done("a").done("b").end(0)
    os.remove(os.path.join(run.outputs["a"], "part-00000.parquet"))
    decision, reason = run.plan()["a"]
    assert decision == "lost"
    assert reason == f"output lost: {run.outputs['a']}/part-00000.parquet is missing"
    assert run.plan()["b"][0] == "skip"


def test_gone_output_folder_is_lost(run):
    run.done("a").end(0)
    for name in os.listdir(run.outputs["a"]):
        os.remove(os.path.join(run.outputs["a"], name))
    os.rmdir(run.outputs["a"])
    assert run.plan()["a"] == ("lost", f"output lost: {run.outputs['a']} is gone")


def test_lost_output_needed_by_a_running_stage_is_rerun(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    os.remove(os.path.join(run.outputs["a"], "part-00000.parquet"))
    decision, reason = run.plan()["a"]
    assert decision == "rerun"
    assert reason.endswith("; needed by b") and "part-00000.parquet is missing" in reason


def test_everything_downstream_of_a_rerun_reruns_transitively(run):
    # a (lost) <- b (runs); a <- e; b <- c <- d; f is independent
    run.done("a").started("b", ["a"]).done("e", ["a"]).done("f")
    run.driver.emit("stage.started", stage="c", upstream=["b"], outputs=[])  # reached in an earlier pass
    run.committed("c", ["b"]).done("d", ["c"]).end(137, 9)
    os.remove(os.path.join(run.outputs["a"], "_SUCCESS"))
    assert run.plan() == {
        "a": ("rerun", f"output lost: {run.outputs['a']}/_SUCCESS is missing; needed by b"),
        "b": ("run", "started in attempt 1 but not committed"),
        "e": ("rerun", "upstream a runs again"),
        "f": ("skip", "committed in attempt 1, output verified"),
        "c": ("rerun", "upstream b runs again"),
        "d": ("rerun", "upstream c runs again"),
    }


def test_a_lost_stage_upstream_of_a_lost_needed_stage_is_rebuilt_too(run):
    run.done("a").done("b", ["a"]).started("c", ["b"]).end(1)
    for stage in ("a", "b"):
        os.remove(os.path.join(run.outputs[stage], "part-00000.parquet"))
    plan = run.plan()
    assert plan["b"][0] == "rerun" and plan["b"][1].endswith("needed by c")
    assert plan["a"][0] == "rerun" and plan["a"][1].endswith("needed by b")


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("grow", "part-00000.parquet changed size (10 -> 13 bytes)"),
        ("extra", "part-00001.parquet is new"),
        ("no-success", "_SUCCESS is missing"),
    ],
)
def test_changed_outputs_are_not_skipped(run, damage, problem):
    run.done("a").started("b", ["a"]).done("c").end(1)
    for stage in ("a", "c"):
        folder = run.outputs[stage]
        if damage == "grow":
            with open(os.path.join(folder, "part-00000.parquet"), "ab") as handle:
                handle.write(b"abc")
        elif damage == "extra":
            make_output(folder, {"part-00001.parquet": b"x"})
        else:
            os.remove(os.path.join(folder, "_SUCCESS"))
    plan = run.plan()
    assert plan["a"] == ("rerun", f"output lost: {run.outputs['a']}/{problem}; needed by b")
    assert plan["c"] == ("lost", f"output lost: {run.outputs['c']}/{problem}")


def test_hidden_and_bookkeeping_files_do_not_count(run):
    run.done("a").end(0)
    make_output(run.outputs["a"], {".part-00000.parquet.crc": b"crc", "_committed_123": b"x"})
    os.makedirs(os.path.join(run.outputs["a"], "_temporary", "0"))
    assert run.plan()["a"][0] == "skip"


def test_rerun_and_from_scratch(run):
    run.done("a").done("b", ["a"]).done("c").started("d", ["c"]).end(1)
    assert run.plan(rerun=["a"]) == {
        "a": ("rerun", "--rerun"),
        "b": ("rerun", "upstream a runs again"),
        "c": ("skip", "committed in attempt 1, output verified"),
        "d": ("run", "started in attempt 1 but not committed"),
    }
    assert run.plan(from_scratch=True) == {
        "a": ("rerun", "--from-scratch"),
        "b": ("rerun", "--from-scratch"),
        "c": ("rerun", "--from-scratch"),
        "d": ("run", "started in attempt 1 but not committed"),
    }


def test_rerun_of_an_unknown_stage_is_a_usage_error(run):
    run.done("a").end(0)
    with pytest.raises(UsageError, match="nope") as caught:
        run.plan(rerun=["a", "nope"])
    assert caught.value.exit_code == 2


def test_plan_follows_pipeline_order(run):
    run.started("z").started("m").started("a")
    run.committed("a").committed("z").committed("m").end(0)
    assert list(run.plan()) == ["z", "m", "a"]
    assert list(run.state().stages) == ["z", "m", "a"]


def test_a_resumed_attempt_keeps_the_first_order_and_sees_its_commits(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    run.start_attempt()
    run.driver.emit("stage.skipped", stage="a", reason="committed in attempt 1, output verified")
    run.done("b", ["a"]).done("c", ["b"]).end(0)
    assert run.plan() == {
        "a": ("skip", "committed in attempt 1, output verified"),
        "b": ("skip", "committed in attempt 2, output verified"),
        "c": ("skip", "committed in attempt 2, output verified"),
    }


def test_an_output_a_later_committed_stage_changed_is_skipped_while_that_stage_verifies(run, tmp_path):
    # a and b write the same table folder: b (an insert after a save) describes it now.
    run.outputs.update(a=str(tmp_path / "table"), b=str(tmp_path / "table"))
    run.started("a", output=False).committed("a")
    run.started("b", ["a"], output=False).committed("b", ["a"], files={"part-00002.parquet": b"z" * 10}).end(0)
    assert run.plan() == {
        "a": ("skip", "committed in attempt 1; b changed its output since"),
        "b": ("skip", "committed in attempt 1, output verified"),
    }
    os.remove(str(tmp_path / "table" / "part-00000.parquet"))  # now b's record fails too
    assert [decision for decision, _ in run.plan().values()] == ["lost", "lost"]


def test_a_stage_that_runs_and_reads_a_changed_output_rebuilds_it_and_what_changed_it(run, tmp_path):
    run.outputs.update(a=str(tmp_path / "table"), b=str(tmp_path / "table"))
    run.started("a", output=False).committed("a").started("c", ["a"])
    run.started("b", ["a"], output=False).committed("b", ["a"], files={"part-00002.parquet": b"z" * 10}).end(137, 9)
    assert run.plan() == {
        "a": ("rerun", "committed in attempt 1; b changed its output since; needed by c"),
        "c": ("run", "started in attempt 1 but not committed"),
        "b": ("rerun", "upstream a runs again"),
    }


def test_a_stage_killed_before_it_started_is_not_planned_as_started(run):
    """A write runs jobs before its stage.started (its probe, adaptive execution's broadcasts and
    map stages); killed then, the journal names the stage only in Spark's telemetry (and, in
    journals from before the listener told those jobs from the write's, a task.committed)."""
    run.done("a")
    run.driver.emit("spark.job.started", stage="b", job=7)
    run.driver.emit("task.committed", stage="b", partition=0, task_attempt=0, records=0, bytes=0)
    run.end(137, 9)
    assert run.plan() == {"a": ("skip", "committed in attempt 1, output verified")}
