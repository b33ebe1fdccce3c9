"""The driver's past replayed (docs/replay.md), end to end: a script with a cached read, inference,
counts, shows, a sampled count naming a folder and a big write, killed in that write and resumed.
The resumed application runs no Spark job before the write's first one (Spark's own event log
says so), prints what attempt 1 printed, and leaves the outputs an uninterrupted run leaves."""

from __future__ import annotations

import glob
import os

import pytest

from sparkrecover.journal import read_journal
from tests.e2e.support import (
    REPLAYED_PAST,
    event_log_options,
    jobs_of_attempt,
    kill_in_a_held_write,
    seed_orders,
    submit_command,
)
from tests.helpers import SPARK_OPTIONS, dry_run, run_cli
from tests.references import FOLDER

pytestmark = pytest.mark.e2e
APP = REPLAYED_PAST
WRITE = 16  # repartition(16, ...)
KILL_AT = 6  # committed partitions of the big write when the driver is killed


def killed_in_the_write(tmp_path, *conf: str) -> tuple[str, str, str]:
    """Attempt 1 of the script under submit, SIGKILLed with KILL_AT of the big write's partitions
    committed: (root, event log folder, what the application printed)."""
    seed_orders(tmp_path)
    root, logs = str(tmp_path / "root"), str(tmp_path / "event-logs")
    options = [*SPARK_OPTIONS, *event_log_options(logs), *conf]
    command = submit_command(root, "past", APP, str(tmp_path / "orders"), str(tmp_path / "out"), spark_options=options)
    return root, logs, kill_in_a_held_write(command, os.path.join(root, "past"), tmp_path, WRITE, KILL_AT)


def test_a_resumed_script_runs_no_job_before_its_unfinished_write(spark, plain_runs, tmp_path):
    plain = plain_runs.start(APP, f"{FOLDER}/orders", f"{FOLDER}/out", seed=seed_orders)
    root, logs, printed = killed_in_the_write(tmp_path)
    run_dir = os.path.join(root, "past")
    assert printed.count("\n") > 10 and "done" not in printed

    plan = dry_run(root, "past")
    (write,) = [s for s in plan["stages"] if s["decision"] == "continue"]
    assert {a["decision"] for a in plan["actions"]} == {"replay"}
    kinds = [a["kind"] for a in plan["actions"]]
    assert kinds == ["count", "show", "show", "count", "collect", "collect", "collect"]

    done = run_cli("resume", "past", "--root", root, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # What the resumed script printed is what attempt 1 printed: the tables, the sampled count
    # and the unordered limit too (live, they could differ), then the rest of the script.
    assert done.stdout == printed + "done\n"
    assert "replay 7 recorded actions without a Spark job" in done.stderr

    # The write's job is the resumed application's first: inference, counts, shows and collects
    # are all replayed, and the cache they filled in attempt 1 is filled inside the write.
    journal = read_journal(run_dir)
    assert not [r for r in journal if r["type"] == "action.recorded" and r["attempt"] == 2]
    jobs = jobs_of_attempt(logs, run_dir, 2)
    assert jobs and [job["Properties"].get("sparkrecover.stage") for job in jobs] == [write["stage"]] * len(jobs)
    assert len(jobs_of_attempt(logs, run_dir, 1)) > len(jobs)
    replayed = [r for r in journal if r["type"] == "action.replayed" and r["attempt"] == 2]
    assert len(replayed) == 7 and {r["recorded_in"] for r in replayed} == {1}
    assert [r["type"] for r in journal if r["type"].startswith("schema.") and r["attempt"] == 2] == ["schema.reused"]

    # One sample folder, named by attempt 1's count; the big write equal to an uninterrupted run's.
    sampled = next(line for line in printed.splitlines() if line.startswith("sampled: ")).split()[1]
    folders = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "out" / "*")))
    assert folders[1] == f"sample_n={sampled}" and len(folders) == 2
    (daily,) = glob.glob(str(tmp_path / "out" / "daily-*"))
    (plain_daily,) = glob.glob(plain.path("out", "daily-*"))
    assert os.path.basename(daily) == os.path.basename(plain_daily)
    rows = sorted(map(tuple, spark.read.parquet(daily).collect()))
    assert rows == sorted(map(tuple, spark.read.parquet(plain_daily).collect())) and len(rows) == 6000
    lines = plain.stdout.splitlines()
    assert [line for line in lines if not line.startswith(("sampled:", "some:"))] == [
        line for line in done.stdout.splitlines() if not line.startswith(("sampled:", "some:"))
    ]
    assert not os.path.exists(os.path.join(run_dir, "results"))  # the run succeeded: its results are gone


def test_actions_over_a_changed_input_and_a_result_over_the_limit_run_again_and_say_why(tmp_path):
    root, _, _ = killed_in_the_write(tmp_path, "--conf", "spark.sparkrecover.results.maxBytes=16k")
    run_dir = os.path.join(root, "past")
    with open(tmp_path / "orders" / "part-1.csv", "a") as handle:
        handle.write("6000,FR,2026-03-28,1.00\n")

    planned = dry_run(root, "past")["actions"]
    over = [a for a in planned if "over the 16.0 KiB limit" in a["reason"]]
    assert len(over) == 1 and over[0]["kind"] == "collect" and over[0]["decision"] == "run"
    assert {a["reason"] for a in planned if a not in over} == {"input changed (1 file): runs again"}

    done = run_cli("resume", "past", "--root", root, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "orders: 6001" in done.stdout and "big: 6001" in done.stdout
    again = [r for r in read_journal(run_dir) if r["type"] == "action.recorded" and r["attempt"] == 2]
    assert len(again) == 7 and not [r for r in read_journal(run_dir) if r["type"] == "action.replayed"]
    (big,) = [r for r in again if r["key"] == over[0]["key"]]
    assert "over the 16.0 KiB limit" in big["ran_because"] and "over the 16.0 KiB limit" in big["not_kept"]
    assert {r["ran_because"] for r in again if r is not big} == {"input changed (1 file): runs again"}
