"""inspect --follow: synthetic writers in a thread (no Spark)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time

import orjson
import pytest
from rich.console import Console

from sparkrecover.cli import render
from sparkrecover.core.views import watch
from sparkrecover.errors import RunNotFoundError
from sparkrecover.planning import reading
from sparkrecover.rundir import lease
from sparkrecover.rundir.runs import Run
from tests import journals
from tests.helpers import screen


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(watch, "POLL_INTERVAL", 0.02)


def in_background(steps, pause=0.15):
    """Run each step in a thread, a pause apart, as a live run would write its journal."""

    def work():
        for step in steps:
            time.sleep(pause)
            step()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def flushed(run, step):
    """A step of a synthetic run, then both writers flushed (the timer would do it within 1 s)."""

    def run_step():
        step()
        for writer in (run.cli, run.driver):
            if not writer._closed:
                writer.flush()

    return run_step


def test_follow_ends_when_the_attempt_ends(cli, tmp_path):
    run = journals.SyntheticRun(tmp_path / "root")
    os.makedirs(run.dir)
    held = lease.Lease(run.ref).acquire()  # this process runs the "attempt"
    run.attempt()
    for writer in (run.cli, run.driver):
        writer.flush()

    def end():
        run.end(0)
        held.release()

    thread = in_background(
        [
            flushed(run, lambda: run.done("orders")),
            flushed(run, lambda: run.started("clean", ("orders",))),
            flushed(run, lambda: run.spark_work("clean", tasks=3, failed_tasks=2, failure="Task lost")),
            flushed(run, lambda: run.committed("clean", ("orders",))),
            end,
        ]
    )
    started = time.monotonic()
    code, out, err = cli("inspect", "nightly", "--follow", "--root", str(tmp_path / "root"))
    thread.join()
    assert time.monotonic() - started < 10
    assert (code, err) == (0, "following run nightly; this ends with the run (Ctrl-C stops following, not the run)\n")
    lines = screen(out, tmp_path).splitlines()
    # Spark's own jobs and stages show only when something failed.
    assert lines[:13] == [
        "── 2026-11-22 ──",
        "03:00:00.500    1 cli     run.started             -                 /jobs/etl.py --day 2026-11-21  "
        "(spark-submit --master local[2])",
        "03:00:01.000    1 cli     attempt.started         -                 spark-submit started by pid 4242",
        "03:00:01.500    1 driver  driver.started          -                 local-1700000001 on local[2] (client), "
        "Spark 3.5.8",
        "03:00:02.000    1 driver  stage.started           orders            checkpoint; writes <tmp>/data/orders",
        "03:00:04.000    1 driver  stage.committed         orders            2 files, 3.0 KiB in 2.0s",
        "03:00:04.500    1 driver  stage.started           clean             checkpoint; writes <tmp>/data/clean; "
        "reads orders",
        "03:00:05.500    1 driver  spark.stage.completed   clean             Spark stage 2.0: 3 tasks, 2 failed; "
        "failed: Task lost",
        "03:00:06.000    1 driver  spark.job.ended         clean             Spark job 2 failed: Task lost",
        "03:00:06.500    1 driver  stage.committed         clean             2 files, 3.0 KiB in 2.0s",
        "03:00:07.000    1 driver  driver.ended            -                 exit 0",
        "03:00:07.500    1 cli     attempt.ended           -                 exit 0",
        "run nightly: attempt 1 ended: succeeded (exit 0)",
    ]
    # then the run as inspect shows it
    assert lines[13:15] == ["run nightly  succeeded", "app:        /jobs/etl.py"]
    assert (
        "│ clean  │ committed │       1 │     2.0s │     - │ 3.0 KiB │    1 │            1 │     3 │ 1 stage, 2 tasks │"
    ) in lines


def test_follow_ends_when_the_process_dies_without_a_word(cli, tmp_path):
    run = journals.SyntheticRun(tmp_path / "root")
    os.makedirs(run.dir)
    held = lease.Lease(run.ref).acquire()
    run.attempt()

    def die():  # kill -9 of the whole tree: no attempt.ended, and the lease now names a dead pid
        run.crash()
        held._stop.set()
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
        ).stdout.strip()
        document = orjson.loads(open(held.url, "rb").read())
        with open(held.url, "wb") as handle:
            handle.write(orjson.dumps({**document, "pid": int(dead)}))

    thread = in_background([flushed(run, lambda: run.done("orders")), flushed(run, lambda: run.started("clean")), die])
    code, out, err = cli("inspect", "nightly", "--follow", "--json", "--root", str(tmp_path / "root"))
    thread.join()
    assert (code, err) == (0, "")
    details = orjson.loads(out)
    assert (details["status"], details["stopped_in"]) == ("crashed", ["clean"])
    assert [(s["stage"], s["status"]) for s in details["stages"]] == [("orders", "committed"), ("clean", "unfinished")]


def test_follow_of_a_finished_run_ends_at_once(cli, tmp_path):
    journals.crashed_run(tmp_path / "root")
    code, out, _err = cli("inspect", "nightly", "--follow", "--root", str(tmp_path / "root"))
    assert code == 0
    assert "run nightly: attempt 1 crashed: nobody holds the run's lease and the attempt never recorded its end" in out
    assert "stopped in: daily (started, never committed)" in out


def test_follow_waits_for_a_journal_while_the_lease_is_held(tmp_path):
    run_dir = str(tmp_path / "root" / "r1")
    held = lease.Lease(Run("r1", run_dir)).acquire()  # submit takes the lease before it writes anything
    updates = watch.follow(reading.WatchedRun(run_dir), "r1", sleep=lambda _: None)
    assert next(updates).ended is None and next(updates).ended is None
    held.release()  # and nothing was ever written: there is no run after all
    with pytest.raises(RunNotFoundError):
        next(updates)


def test_the_live_view_on_a_terminal(tmp_path, monkeypatch):
    run = journals.SyntheticRun(tmp_path / "root")
    os.makedirs(run.dir)
    held = lease.Lease(run.ref).acquire()
    run.attempt()
    run.done("orders")
    run.started("clean")
    for writer in (run.cli, run.driver):
        writer.flush()
    monkeypatch.setenv("TERM", "xterm")  # a dumb terminal gets the final picture only, as it should
    screen_file = io.StringIO()
    render._report = Console(file=screen_file, force_terminal=True, width=100, color_system=None)

    def end():
        run.committed("clean")
        run.end(0)
        held.release()

    from sparkrecover.cli import follow as command

    thread = in_background([end], pause=0.3)
    details = command.until_ended(run.ref, quiet=False)
    thread.join()
    assert details["status"] == "succeeded"
    drawn = screen_file.getvalue()
    assert "running" in drawn  # clean was drawn as running before it committed
    final = drawn[drawn.rindex("✓ run nightly") :]
    assert "succeeded   attempt 1, 2/2 stages done" in final
    assert "✓   orders" in final and "committed   2.0s  1 Spark job  2 tasks  1,000 rows" in final
    assert "run nightly: attempt 1 ended: succeeded (exit 0)" in drawn


def test_tail_and_follow_on_an_fsspec_root(cli):
    """The same code path on memory://, which has no append: the writer rewrites segment objects."""
    run = journals.SyntheticRun("memory://follow-root")
    run.dir = "memory://follow-root/nightly"
    held = lease.Lease(run.ref).acquire()
    run.attempt()
    run.driver.flush()

    def end():
        run.end(0)
        held.release()

    thread = in_background(
        [
            flushed(run, lambda: run.driver.emit("stage.started", stage="s", outputs=[])),
            flushed(run, lambda: run.driver.emit("stage.committed", stage="s", manifest=[], duration_s=1.0)),
            end,
        ]
    )
    code, out, _err = cli("inspect", "nightly", "--follow", "--json", "--root", "memory://follow-root")
    thread.join()
    details = orjson.loads(out)
    assert (code, details["status"], [(s["stage"], s["status"]) for s in details["stages"]]) == (
        0,
        "succeeded",
        [("s", "committed")],
    )
