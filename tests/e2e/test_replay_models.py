"""Model training replayed (docs/replay.md), end to end: MLlib's KMeans with a random
initialization and no seed trained before a write, the driver killed in that write and resumed.
The resumed application trains nothing (Spark's own event log says so), prints attempt 1's model,
and its write equals an uninterrupted run's."""

from __future__ import annotations

import os

import pytest

from sparkrecover.journal import read_journal
from tests.e2e.support import event_log_options, jobs_of_attempt, kill_in_a_held_write, submit_command
from tests.helpers import APPS, SPARK_OPTIONS, dry_run, run_cli
from tests.references import FOLDER

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "trained_model.py")
WRITE, KILL_AT = 16, 6


def stage_names(job: dict) -> list[str]:
    return [stage["Stage Name"] for stage in job["Stage Infos"]]


def trains(job: dict) -> bool:
    return any("KMeans.scala" in name for name in stage_names(job))


def test_a_resumed_driver_loads_the_model_attempt_one_trained(spark, plain_runs, tmp_path):
    pytest.importorskip("numpy")
    plain = plain_runs.start(APP, f"{FOLDER}/out")
    root, logs = str(tmp_path / "root"), str(tmp_path / "event-logs")
    options = [*SPARK_OPTIONS, *event_log_options(logs)]
    command = submit_command(root, "model", APP, str(tmp_path / "out"), spark_options=options)
    run_dir = os.path.join(root, "model")
    first = kill_in_a_held_write(command, run_dir, tmp_path, WRITE, KILL_AT)
    assert first.startswith("centers: ") and "done" not in first

    plan = dry_run(root, "model")
    assert [(a["kind"], a["decision"]) for a in plan["actions"]] == [("mllib.train", "load")]
    # The script's model save is a stage, committed; the copy sparkrecover saved for replay is none.
    assert [s["decision"] for s in plan["stages"]] == ["skip", "continue"]
    (write,) = [s for s in plan["stages"] if s["decision"] == "continue"]

    done = run_cli("resume", "model", "--root", root, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == first.splitlines()[0]  # attempt 1's model, not a new draw

    assert any(trains(job) for job in jobs_of_attempt(logs, run_dir, 1))
    jobs = jobs_of_attempt(logs, run_dir, 2)
    before = [job for job in jobs if job["Properties"].get("sparkrecover.stage") != write["stage"]]
    first_write = next(i for i, job in enumerate(jobs) if job["Properties"].get("sparkrecover.stage") == write["stage"])
    assert not [job for job in jobs[:first_write] if trains(job)], [stage_names(j) for j in before]
    replayed = [r for r in read_journal(run_dir) if r["type"] == "action.replayed" and r["attempt"] == 2]
    assert [(r["kind"], r["recorded_in"]) for r in replayed] == [("mllib.train", 1)]

    rows = sorted(map(tuple, spark.read.parquet(str(tmp_path / "out" / "points")).collect()))
    assert rows == sorted(map(tuple, spark.read.parquet(plain.path("out", "points")).collect())) and len(rows) == 400
    assert "done" in plain.stdout
