"""The support module of the end-to-end tests: what more than one of them needs, so that no test
module imports another. (tests/helpers.py holds what in-process tests need too: the CLI in a
subprocess, the journal's records, ``SPARK_OPTIONS``.)

- The apps the tests submit, each named once, and the command line that submits one.
- The one way to run and kill: ``run_and_kill`` runs a command line in a process group of its own
  and SIGKILLs it (or stops it as ``stop`` says) once a predicate holds. ``submit_and_kill`` and
  ``resume_and_kill`` are it with the predicate "this journal record is there"; ``commits_reach``
  is the predicate "this many task commits".
- ``Hold``: tasks of tests/apps/one_write.py, shuffle_write.py and shuffle_job.py that wait for a
  file the test writes. A test whose kill must land while a task is in flight (a file half written, an upload
  open) holds the tasks after the ones it waits for: the kill then lands in that moment by
  construction, however slow the machine, instead of in a sleep that usually lasts long enough.
- What a run of those apps left: its task commits, the partitions it computed (marker files),
  the map tasks in Spark's event log.
- S3 through s3a: hadoop-aws's jars and the options that point them at the moto server.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.journal import read_journal
from sparkrecover.rundir.runs import Run
from tests.helpers import (
    APPS,
    REPO,
    SPARK_OPTIONS,
    dry_run,
    journaled,
    journaled_records,
    spark_events,
    sparkrecover_command,
)

T = TypeVar("T")

# -- the apps ---------------------------------------------------------------------------------------
PIPELINE = os.path.join(REPO, "sparkrecover", "demo", "pipeline.py")  # the demo a user runs first
ONE_WRITE = os.path.join(APPS, "one_write.py")
SHUFFLE_WRITE = os.path.join(APPS, "shuffle_write.py")
SHUFFLE_JOB = os.path.join(APPS, "shuffle_job.py")
TINY = os.path.join(APPS, "tiny.py")
REPLAYED_PAST = os.path.join(APPS, "replayed_past.py")
# Spark options without spark.sql.shuffle.partitions: apps whose shuffles set their own.
SHUFFLING = ["--master", "local[2]", "--conf", "spark.ui.enabled=false"]
# What a test that reads the journal while the run goes on passes to submit: records drained often.
FLUSH_OFTEN = ("--flush-interval", "0.2")
PARTS = 16  # tests/apps/one_write.py's partitions in the tests that kill it half way


def submit_command(
    root: str,
    run_id: str,
    app: str,
    *app_args: str,
    spark_options: Sequence[str] = SPARK_OPTIONS,
    submit_options: Sequence[str] = (),
) -> list[str]:
    """``sparkrecover submit`` of ``app`` as run ``run_id`` below ``root``."""
    return sparkrecover_command(
        "submit", "--root", root, "--run-id", run_id, *submit_options, "--", *spark_options, app, *app_args
    )


def one_write_command(
    root: str,
    out: str,
    markers: str,
    variant: str = "overwrite",
    *,
    spark_options: Sequence[str] = (),
    app: str = ONE_WRITE,
) -> list[str]:
    """tests/apps/one_write.py (or a copy of it) writing PARTS partitions to ``out``, as run
    ``night`` below ``root``, its journal drained often."""
    return submit_command(
        root,
        "night",
        app,
        out,
        markers,
        str(PARTS),
        variant,
        spark_options=[*SPARK_OPTIONS, *spark_options],
        submit_options=FLUSH_OFTEN,
    )


# -- run and kill -----------------------------------------------------------------------------------
def wait_until(process: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 240) -> None:
    """Return once ``ready()`` holds; fail if ``process`` ends first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the run ended (exit {process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.05)


def run_and_kill(
    command: list[str],
    until: Callable[[], bool],
    what: str,
    *,
    cwd: str | None = None,
    env: dict | None = None,
    timeout: float = 240,
    stop: Callable[[subprocess.Popen], None] | None = None,
    stdout: Path | None = None,
) -> int:
    """Run ``command`` in its own process group and SIGKILL the group, and every process below it,
    once ``until()`` holds (``what`` names it in a failure); returns the time of the kill (ns).
    ``stop``: how to stop it instead (a signal sent to it, say), waited for before the SIGKILL
    that clears whatever is left. ``stdout``: a file for what the command prints (else dropped)."""
    printed = open(stdout, "wb") if stdout is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(
            command, stdout=printed, stderr=subprocess.DEVNULL, start_new_session=True, cwd=cwd, env=env
        )
    finally:
        if stdout is not None:
            printed.close()  # type: ignore[union-attr]
    try:
        wait_until(process, until, what, timeout)
        if stop is not None:
            stop(process)
            process.wait(timeout=120)
    finally:
        kill_tree(process.pid)
        process.wait(timeout=60)
    return time.time_ns()


def recorded(run_dir: str, event: str, stage: str, attempt: int | None = None) -> Callable[[], bool]:
    """The predicate "``event`` of ``stage`` (in ``attempt``, when given) is journaled"."""
    return lambda: journaled(run_dir, event, stage, attempt) is not None


def submit_and_kill(
    root: str,
    run_id: str,
    app_args: list[str],
    after_stage: str,
    *,
    event: str = "stage.committed",
    cwd: str | None = None,
    app: str = PIPELINE,
    submit_options: tuple[str, ...] = (),
    spark_options: tuple[str, ...] = (),
    env: dict | None = None,
) -> str:
    """Submit a real run and SIGKILL it right after ``event`` (by default the commit) of
    ``after_stage`` appears in the journal. ``root`` is a local folder or any fsspec URL. Returns
    the run directory."""
    from sparkrecover.rundir import storage

    run_dir = storage.join(root, run_id)
    command = submit_command(
        root, run_id, app, *app_args, spark_options=[*SPARK_OPTIONS, *spark_options], submit_options=submit_options
    )
    run_and_kill(command, recorded(run_dir, event, after_stage), f"{event} of {after_stage}", cwd=cwd, env=env)
    return run_dir


def resume_and_kill(root: str, run_id: str, event: str, stage: str, *, attempt: int) -> None:
    """Resume a run and SIGKILL it right after ``event`` of ``stage`` in ``attempt`` (the resume's
    own) appears in the journal."""
    from sparkrecover.rundir import storage

    command = sparkrecover_command("resume", run_id, "--root", root)
    run_and_kill(command, recorded(storage.join(root, run_id), event, stage, attempt), f"{event} of {stage}")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL the process group of ``pid`` (a process started with ``start_new_session``) and
    every process below it: PySpark's Python daemon moves itself to a process group of its own, so
    a group kill alone leaves its workers running for a moment, and they may still leave a marker
    after the kill."""
    below = descendants(pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for child in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def freeze_group(pid: int, run_dir: str) -> None:
    """SIGSTOP the process group of ``pid`` (a paused VM) outside its lease's lock: a driver frozen
    inside its heartbeat's check-and-write, a few milliseconds that the lock covers, holds the lock
    until it is continued, and a takeover then waits and exits 4, as it does for a driver frozen in
    its job commit (docs/operations.md, "Fencing"). A test of a driver frozen in its write means
    outside both."""
    from sparkrecover.rundir import lease_lock

    with lease_lock.held(Run(os.path.basename(run_dir), run_dir)):
        os.killpg(pid, signal.SIGSTOP)


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """Run the calls at once, each in a thread (each starts and waits for a process of its own:
    two spark-submits overlap their JVM starts), and return their results in order."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


# -- holds ------------------------------------------------------------------------------------------
class Hold:
    """Tasks that wait for a signal: under ``env(first)``, the tasks of tests/apps/one_write.py
    (at their sleep row; its shuffled variant's after the shuffle), the write tasks of
    tests/apps/shuffle_write.py and replayed_past.py and the result tasks of
    tests/apps/shuffle_job.py (after their marker or sleep) whose partition is ``first`` or later
    wait until the test writes the file (``release``; a released hold stays released).
    On local[2] the partitions before ``first`` then commit, the next two stay in flight, and
    nothing else happens until the kill: a run killed once ``first`` partitions committed has
    exactly those, whenever the predicate is seen."""

    def __init__(self, folder) -> None:
        self.path = os.path.join(str(folder), "release-the-held-tasks")

    def env(self, first: int, base: dict[str, str] | None = None, **more: str) -> dict[str, str]:
        """The environment (``base``, by default this process's) whose runs hold from ``first``."""
        return {**(os.environ if base is None else base), "HOLD_TASKS": f"{first}:{self.path}", **more}

    def release(self) -> None:
        with open(self.path, "w"):
            pass


def event_log_options(logs: str) -> list[str]:
    """Spark options that write each application's event log, uncompressed, to ``logs`` (made)."""
    os.makedirs(logs, exist_ok=True)
    return ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={logs}",
            "--conf", "spark.eventLog.compress=false"]  # fmt: skip


def jobs_of_attempt(logs: str, run_dir: str, attempt: int) -> list[dict]:
    """The SparkListenerJobStart events of one attempt's application, from Spark's event log."""
    (started,) = [r for r in read_journal(run_dir) if r["type"] == "driver.started" and r["attempt"] == attempt]
    return spark_events(logs, started["app_id"], "SparkListenerJobStart")


def kill_in_a_held_write(command: Sequence[str], run_dir: str, tmp_path, partitions: int, kill_at: int) -> str:
    """Run ``command`` (an app whose write tasks honour ``Hold``) with its tasks from ``kill_at``
    on held, SIGKILL it once ``kill_at`` partitions of its write of ``partitions`` committed
    (exactly those, the next ones in flight), and return what it printed."""

    def committed() -> bool:
        journal = journaled_records(run_dir)
        writes = {r["stage"] for r in journal if r["type"] == "write.started" and r["partitions"] == partitions}
        done = {r["partition"] for r in journal if r["type"] == "task.committed" and r["stage"] in writes}
        return len(done) >= kill_at

    printed = Path(str(tmp_path)) / "attempt-1.out"
    env = Hold(tmp_path).env(kill_at, PYTHONUNBUFFERED="1")
    run_and_kill(command, committed, f"{kill_at} committed write partitions", env=env, stdout=printed)
    return printed.read_text()


def submit_one_write_and_kill(
    tmp_path,
    committed: int,
    variant: str = "overwrite",
    *,
    spark_options: Sequence[str] = (),
    app: str = ONE_WRITE,
    env: dict[str, str] | None = None,
    stop: Callable[[subprocess.Popen], None] | None = None,
) -> int:
    """Submit tests/apps/one_write.py as run ``night`` (below ``tmp_path``: root/, out/, markers/),
    its partitions from ``committed`` on held (``Hold(tmp_path)``, no sleeps), and SIGKILL it (or
    ``stop`` it) once ``committed`` partitions committed: exactly those are, the next ones in
    flight. Returns the time of the kill (ns)."""
    root = os.path.join(str(tmp_path), "root")
    command = one_write_command(
        root, os.path.join(str(tmp_path), "out"), os.path.join(str(tmp_path), "markers"), variant,
        spark_options=spark_options, app=app,
    )  # fmt: skip
    held = Hold(tmp_path).env(committed, env, ONE_WRITE_SLEEP="0")
    reached = commits_reach(os.path.join(root, "night"), 1, committed)
    return run_and_kill(command, reached, f"{committed} task commits", env=held, timeout=600, stop=stop)


# -- what a run of the apps left --------------------------------------------------------------------
def task_commits(run_dir: str, attempt: int, stage: str = "") -> int:
    """Partitions ``attempt`` computed and committed so far (in the writes whose name has
    ``stage``), as the run's own fold reads the journal: a partition kept from an earlier attempt
    commits again, empty, and is not counted."""
    try:
        state = RunState.from_events(os.path.basename(run_dir), read_journal(run_dir))
    except Exception:  # a segment being rewritten on S3: look again
        return 0
    return sum(
        1
        for found in state.stages.values()
        if stage in found.name
        for by, _ in found.committed_tasks.values()
        if by == attempt
    )


def planned(root: str) -> dict:
    """The dry run's plan for the one write of run ``night`` (one_write.py, shuffle_write.py)."""
    (stage,) = dry_run(root, "night")["stages"]
    return stage


def commits_reach(run_dir: str, attempt: int, commits: int) -> Callable[[], bool]:
    """The predicate "``attempt`` journaled ``commits`` task commits"."""
    return lambda: task_commits(run_dir, attempt) >= commits


def computed_since(markers: str, since_ns: int) -> set[int]:
    """The partitions whose first row was computed after ``since_ns`` (one_write.py's markers)."""
    return {int(name.split("-")[0]) for name in os.listdir(markers) if int(name.split("-")[1]) > since_ns}


def computed(markers: str, kind: str, since_ns: int = 0) -> list[int]:
    """The partitions of ``kind`` (map, write) tasks computed after ``since_ns``, one per task
    (shuffle_write.py's markers)."""
    found = []
    for name in os.listdir(markers):
        what, partition, _task, stamp = name.split("-")
        if what == kind and int(stamp) > since_ns:
            found.append(int(partition))
    return sorted(found)


def seed_orders(folder) -> None:
    """REPLAYED_PAST's input: orders in two CSV files below ``folder``, the same bytes every time
    (a module-level function: ``plain_runs`` seeds its run with it)."""
    draw = random.Random(37)
    os.makedirs(os.path.join(folder, "orders"))
    for part in range(2):
        with open(os.path.join(folder, "orders", f"part-{part}.csv"), "w") as handle:
            handle.write("order_id,country,day,amount\n")
            for order in range(part * 3000, (part + 1) * 3000):
                day = f"2026-{1 + order % 3:02d}-{1 + draw.randrange(28):02d}"
                handle.write(f"{order},{'FR DE NL ES'.split()[draw.randrange(4)]},{day},{draw.uniform(1, 500):.2f}\n")


def map_tasks(event_logs: str, app_id: str) -> int:
    """Shuffle map tasks the application ran, as Spark's own event log counts them."""
    ended = spark_events(event_logs, app_id, "SparkListenerTaskEnd")
    return sum(event["Task Type"] == "ShuffleMapTask" for event in ended)


# -- S3 through s3a ---------------------------------------------------------------------------------
def s3a_jars() -> list[str]:
    folder = os.environ.get("SPARKRECOVER_S3A_JARS") or os.path.join(sys.prefix, "s3a-jars")
    return sorted(glob.glob(os.path.join(folder, "*.jar")))


needs_s3a = pytest.mark.skipif(
    not s3a_jars(), reason="no hadoop-aws jars: run scripts/fetch_s3a_jars.py (setup.sh test does)"
)


def s3a_options(endpoint: str) -> list[str]:
    """Spark's side of the same S3 (docs/operations.md, "Journal on S3"). The numeric timeouts and the SDK v1
    credentials provider are what hadoop-aws 3.3.1 needs under pyspark 4's Hadoop 3.5 defaults."""
    conf = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
        "fs.s3a.threads.keepalivetime": "60",
        "fs.s3a.connection.timeout": "200000",
        "fs.s3a.connection.establish.timeout": "30000",
        "fs.s3a.multipart.purge.age": "86400",
        "fs.s3a.connection.ttl": "300000",
        "fs.s3a.connection.idle.time": "60000",
        "fs.s3a.retry.interval": "500",
        "fs.s3a.retry.throttle.interval": "100",
    }
    options = ["--jars", ",".join(s3a_jars())]
    for key, value in conf.items():
        options += ["--conf", f"spark.hadoop.{key}={value}"]
    return options
