"""The summary ``submit`` and ``resume`` end with, from a journal."""

from __future__ import annotations

from sparkrecover.core.fold import savings
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views import recalled, summary
from sparkrecover.journal import read_journal
from tests import journals


def lines(run: journals.SyntheticRun, first_attempt: int, code: int) -> list[str]:
    state = RunState.from_events(run.run_id, read_journal(run.dir))
    return summary.command_lines(summary.command_summary(state, first_attempt, code))


def test_a_stage_an_interrupted_attempt_was_running_is_cut_off_not_run(tmp_path):
    run = journals.SyntheticRun(tmp_path / "root").attempt().done("orders").started("daily")
    run.end(143, signal=15, error="interrupted by SIGTERM")
    assert lines(run, 1, 143) == [
        "run nightly: interrupted (exit 143), attempt 1",
        "stages: 0 skipped, 1 run, 1 cut off (of 2)",
    ]
    run.attempt(plan={"orders": "skip", "daily": "run"}).skipped("orders", "committed in attempt 1").started("daily")
    run.crash()
    assert lines(run, 2, 137)[1] == "stages: 1 skipped, 0 run, 1 cut off (of 2)"
    run.attempt(plan={"orders": "skip", "daily": "run"}).skipped("orders", "committed in attempt 1")
    run.done("daily").end(0)
    assert lines(run, 3, 0)[1] == "stages: 1 skipped, 1 run (of 2)"


def test_a_write_stopped_in_the_map_stage_it_runs_before_it_starts_is_cut_off(tmp_path):
    """A write's map stage runs before its stage.started (the driver learns the write's partitions
    first): stopped there, the journal names the stage only in Spark's telemetry. The attempt was
    in that stage: cut off, not 'not reached'; a later attempt that never got to it did not reach
    it."""
    run = journals.SyntheticRun(tmp_path / "root").attempt().done("orders").spark_work("daily", tasks=0)
    run.end(130, signal=2, error="interrupted by SIGINT")
    assert lines(run, 1, 130)[1] == "stages: 0 skipped, 1 run, 1 cut off (of 2)"
    run.attempt(plan={"orders": "skip", "daily": "run"}).skipped("orders", "committed in attempt 1")
    run.crash()
    assert lines(run, 2, 137)[1] == "stages: 1 skipped, 0 run, 1 not reached (of 2)"


def test_the_plan_says_replayed_actions_and_loaded_models_apart():
    """A replayed action runs no Spark job; a loaded model does (its class's loader reads its folder)."""
    entries = [
        {"key": "a.py:3#1 count()", "kind": "count", "decision": "replay", "reason": "inputs unchanged"},
        {"key": "a.py:4#1 ml.fit(KMeans)", "kind": "ml.fit", "decision": "load", "reason": "inputs unchanged"},
        {"key": "a.py:5#1 mllib.train(ALS.train)", "kind": "mllib.train", "decision": "load"},
        {"key": "a.py:6#1 collect()", "kind": "collect", "decision": "run", "reason": "no record"},
    ]
    entries[2]["reason"] = "no input files"
    assert recalled.action_lines(entries) == [
        "replay 1 recorded action without a Spark job (inputs unchanged)",
        "load 2 trained models from the run's storage instead of training them (inputs unchanged; no input files); "
        "loading runs Spark jobs of its own",
        "run again: a.py:6#1 collect(): no record",
    ]


def test_the_time_saved_names_loaded_models_beside_replayed_actions():
    found = [savings.Saving(2, None, 1.0, "replayed 1 action"), savings.Saving(2, None, 2.0, "loaded 1 model")]
    assert savings.sentence(found).endswith("(1 action replayed, 1 model loaded)")
