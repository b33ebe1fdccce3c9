"""End to end on real Spark: real spark-submit on local[2], real SIGKILL of the whole driver."""

from __future__ import annotations

import glob
import os

import orjson
import pytest

from tests.e2e.support import submit_and_kill
from tests.helpers import decisions, events_of, run_cli

pytestmark = pytest.mark.e2e
APP_ARGS = ["--rows", "60000", "--pause", "1"]


def attempt_events(run_dir: str, attempt: int) -> list[dict]:
    return [e for e in events_of(run_dir) if e["attempt"] == attempt]


def test_killed_run_resumes_skipping_finished_stages(tmp_path, pipeline_reference):
    root, out = str(tmp_path / "root"), str(tmp_path / "out")
    run_dir = submit_and_kill(root, "nightly", [out, *APP_ARGS], after_stage="clean")
    first = attempt_events(run_dir, 1)
    assert [e["stage"] for e in first if e["type"] == "stage.committed"] == ["orders", "clean"]
    assert not any(e["type"] == "attempt.ended" for e in first)

    result = run_cli("resume", "nightly", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")
    assert pipeline_reference.text("out", "report.txt").startswith("day\ttotal\torders\n")  # a header, then rows

    second = attempt_events(run_dir, 2)
    assert {e["stage"]: e["reason"] for e in second if e["type"] == "stage.skipped"} == {
        "orders": "committed in attempt 1, output verified",
        "clean": "committed in attempt 1, output verified",
    }
    assert [e["stage"] for e in second if e["type"] == "stage.committed"] == ["daily", "publish"]
    jobs = [e for e in second if e["type"] == "spark.job.started"]
    assert jobs and not [e for e in jobs if e["stage"] in ("orders", "clean")]
    assert {e["stage"] for e in jobs} >= {"daily", "publish"}
    assert [e["exit_code"] for e in second if e["type"] == "attempt.ended"] == [0]
    plan = orjson.loads(open(os.path.join(run_dir, "plans", "0002.json"), "rb").read())
    assert [(s["stage"], s["decision"]) for s in plan["stages"]][:2] == [("orders", "skip"), ("clean", "skip")]

    inspected = run_cli("inspect", "nightly", "--root", root, "--json")
    summary = orjson.loads(inspected.stdout)
    assert summary["status"] == "succeeded"
    assert [(a["attempt"], a["outcome"]) for a in summary["attempts"]] == [(1, "crashed"), (2, "succeeded")]
    assert {s["stage"]: (s["status"], s["attempt"]) for s in summary["stages"]} == {
        "orders": ("skipped", 1),
        "clean": ("skipped", 1),
        "daily": ("committed", 2),
        "publish": ("committed", 2),
    }


def _kill_while_daily_runs(tmp_path, name: str) -> tuple[str, str, str]:
    """A run killed while daily (which reads clean) is being written."""
    root, out = str(tmp_path / "root"), str(tmp_path / "out")
    run_dir = submit_and_kill(root, name, [out, *APP_ARGS], after_stage="daily", event="stage.started")
    return root, out, run_dir


def test_lost_output_nothing_needs_is_reported_not_recomputed(tmp_path, pipeline_reference):
    root, out, run_dir = _kill_while_daily_runs(tmp_path, "lost")
    victim = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "orders", "part-*")))[0]
    os.remove(victim)
    plan = decisions(root, "lost")
    assert plan["orders"][0] == "lost" and os.path.basename(victim) in plan["orders"][1]
    assert plan["clean"][0] == "skip"

    result = run_cli("resume", "lost", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")
    second = attempt_events(run_dir, 2)
    assert "orders" not in [e["stage"] for e in second if e["type"] in ("stage.started", "stage.committed")]
    assert [e["stage"] for e in second if e["type"] == "stage.skipped"] == ["orders", "clean"]


def test_lost_output_that_is_needed_reruns_its_producer_and_downstream(tmp_path, pipeline_reference):
    root, out, run_dir = _kill_while_daily_runs(tmp_path, "needed")
    os.remove(sorted(glob.glob(os.path.join(run_dir, "checkpoints", "clean", "part-*")))[0])
    plan = decisions(root, "needed")
    assert plan["orders"][0] == "skip"
    assert plan["clean"][0] == "rerun" and "needed by daily" in plan["clean"][1]
    assert plan["daily"][0] == "run"

    result = run_cli("resume", "needed", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")
    second = attempt_events(run_dir, 2)
    assert [e["stage"] for e in second if e["type"] == "stage.committed"] == ["clean", "daily", "publish"]
