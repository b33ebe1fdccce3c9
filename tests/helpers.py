"""Helpers for tests: running the CLI, waiting on a journal, killing a real driver."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import orjson

from sparkrecover.journal import read_journal
from sparkrecover.rundir.runs import Run

if TYPE_CHECKING:
    from sparkrecover.driver.process.runtime import Runtime

T = TypeVar("T")
PIPELINE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sparkrecover", "demo", "pipeline.py"
)
SPARK_OPTIONS = ["--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"]


@contextlib.contextmanager
def memory_run_dir():
    """A fresh ``memory://`` run directory, removed afterwards (memory:// lives in this process)."""
    import uuid

    import fsspec

    base = f"memory://sparkrecover-test-{uuid.uuid4().hex}"
    try:
        yield base + "/r1"
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(base):
            fs.rm(base, recursive=True)


def screen(text: str, tmp_path) -> str:
    """Output as a reader sees it: temp paths replaced, trailing blanks (rich pads titles) dropped."""
    return "".join(line.rstrip() + "\n" for line in text.replace(str(tmp_path), "<tmp>").splitlines())


def on_screen(cli, tmp_path, command: str, *args: str) -> tuple[int, str, str]:
    """``command`` over the root ``<tmp_path>/root``: exit code, stdout and stderr as ``screen``
    shows them (stdout as printed when it is a --json document)."""
    code, out, err = cli(command, *args, "--root", str(tmp_path / "root"))
    return code, out if "--json" in args else screen(out, tmp_path), screen(err, tmp_path)


def run_cli_inprocess(*args: str) -> tuple[int, str, str]:
    """The CLI's main() in this process: (exit code, stdout, stderr)."""
    from sparkrecover.cli import app as cli
    from sparkrecover.cli import render

    render.reset()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(list(args))
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    render.reset()
    return code, out.getvalue(), err.getvalue()


def sparkrecover_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sparkrecover", *args]


def run_cli(
    *args: str, timeout: float = 300, env: dict | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess."""
    return subprocess.run(
        sparkrecover_command(*args), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


def events_of(run_dir: str) -> list[dict]:
    return read_journal(run_dir)


def _segment_contents(run_dir: str):
    """The bytes of every journal segment of a run, local or on any fsspec URL."""
    from sparkrecover.journal.segments import list_segments
    from sparkrecover.rundir import storage

    for segment in list_segments(run_dir):
        try:
            yield storage.read_bytes(segment.url)
        except FileNotFoundError:  # compacted away between the listing and the read
            continue


def spark_events(event_logs: str, app_id: str, kind: str) -> list[dict]:
    """The events of one kind (``SparkListenerJobStart``) an application wrote to Spark's event log
    (uncompressed; a file, or Spark 4's rolling folder of ``events_*`` files), in order."""
    import glob
    import json

    found = []
    for path in glob.glob(os.path.join(event_logs, f"*{app_id}*")):
        files = sorted(glob.glob(os.path.join(path, "events_*"))) if os.path.isdir(path) else [path]
        for name in files:
            with open(name) as handle:
                found += [json.loads(line) for line in handle if f'"Event":"{kind}"' in line]
    return found


def journaled_records(run_dir: str) -> list[dict]:
    """Every whole record of a run's journal so far, as a live run leaves it (a torn last line skipped)."""
    found = []
    for content in _segment_contents(run_dir):
        for line in content.split(b"\n"):
            try:
                found.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return found


def journaled(run_dir: str, event_type: str, stage: str | None = None, attempt: int | None = None) -> dict | None:
    """The first journal record of ``event_type`` (of ``stage``, of ``attempt``, when given), or None."""
    for content in _segment_contents(run_dir):
        for line in content.split(b"\n"):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if (
                record.get("type") == event_type
                and (stage is None or record.get("stage") == stage)
                and (attempt is None or record.get("attempt") == attempt)
            ):
                return record
    return None


def wait_for(
    run_dir: str,
    event_type: str,
    stage: str | None = None,
    timeout: float = 240,
    process: subprocess.Popen | None = None,
    attempt: int | None = None,
) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = journaled(run_dir, event_type, stage, attempt)
        if record is not None:
            return record
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the run ended (exit {process.returncode}) before {event_type} {stage}")
        time.sleep(0.1)
    raise AssertionError(f"no {event_type} for {stage} within {timeout}s")


@contextlib.contextmanager
def zero_code_hooks(script: str):
    """pyspark's writers, RDD saves and ``SparkSession.sql`` hooked as the bootstrap hooks them for
    ``script`` (call sites relative to its folder), and put back afterwards."""
    from sparkrecover.driver.recording import hooks, sqlwrites, zerocode

    zerocode.install(script)
    sqlwrites.install()
    try:
        yield
    finally:
        hooks.uninstall()


def line_of(path: str, marker: str) -> int:
    """The number of the first line of ``path`` holding ``marker``: tests name call sites without
    counting lines."""
    with open(path) as handle:
        return next(number for number, text in enumerate(handle, 1) if marker in text)


def marked_line(path: str, tag: str) -> int:
    """The number of the line of ``path`` that ends with the comment ``# <tag>``."""
    with open(path) as handle:
        for number, text in enumerate(handle, 1):
            if text.rstrip().endswith(f"# {tag}"):
                return number
    raise AssertionError(f"no line of {path} ends with # {tag}")


def implicit_stage(app: str, marker: str, mode: str, target: str) -> str:
    """The implicit stage name (``<file>:<line>#1 <mode> <target>``) of ``app``'s first write on
    the line holding ``marker``."""
    return f"{os.path.basename(app)}:{line_of(app, marker)}#1 {mode} {target}"


def dry_run(root: str, run_id: str) -> dict:
    """The plan ``resume --dry-run --json`` prints for a run."""
    result = run_cli("resume", run_id, "--root", root, "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)


def decisions(root: str, run_id: str) -> dict[str, tuple[str, str]]:
    """The dry run's plan as {stage: (decision, reason)}."""
    return {s["stage"]: (s["decision"], s["reason"]) for s in dry_run(root, run_id)["stages"]}


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """Run the calls at once, each in a thread (each starts and waits for a process of its own:
    two spark-submits overlap their JVM starts), and return their results in order."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


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
    """Submit a real run in its own process group and SIGKILL the whole group right after
    ``event`` (by default the commit) of ``after_stage`` appears in the journal. ``root`` is a
    local folder or any fsspec URL. Returns the run directory."""
    from sparkrecover.rundir import storage

    run_dir = storage.join(root, run_id)
    command = sparkrecover_command(
        "submit",
        "--root",
        root,
        "--run-id",
        run_id,
        *submit_options,
        "--",
        *SPARK_OPTIONS,
        *spark_options,
        app,
        *app_args,
    )
    run_and_kill(command, run_dir, event, after_stage, cwd=cwd, env=env)
    return run_dir


def resume_and_kill(root: str, run_id: str, event: str, stage: str, *, attempt: int) -> None:
    """Resume a run in its own process group and SIGKILL the whole group right after ``event`` of
    ``stage`` in ``attempt`` (the resume's own) appears in the journal."""
    from sparkrecover.rundir import storage

    command = sparkrecover_command("resume", run_id, "--root", root)
    run_and_kill(command, storage.join(root, run_id), event, stage, attempt=attempt)


def run_and_kill(
    command: list[str],
    run_dir: str,
    event: str,
    stage: str,
    *,
    attempt: int | None = None,
    cwd: str | None = None,
    env: dict | None = None,
) -> None:
    """Run a sparkrecover command line in its own process group and SIGKILL the group, and every
    process below it, once ``event`` of ``stage`` (in ``attempt``, when given) is journaled."""

    def journal_has_it() -> bool:
        return journaled(run_dir, event, stage, attempt) is not None

    run_and_kill_when(command, journal_has_it, f"{event} of {stage}", cwd=cwd, env=env)


def run_and_kill_when(
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
        deadline = time.monotonic() + timeout
        while not until():
            assert process.poll() is None, f"the run ended (exit {process.returncode}) before {what}"
            assert time.monotonic() < deadline, f"no {what} within {timeout}s"
            time.sleep(0.05)
        if stop is not None:
            stop(process)
            process.wait(timeout=120)
    finally:
        kill_tree(process.pid)
        process.wait(timeout=60)
    return time.time_ns()


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


def freeze_group(pid: int, run_dir: str) -> None:
    """SIGSTOP the process group of ``pid`` (a paused VM) outside its lease's lock: a driver frozen
    inside its heartbeat's check-and-write, a few milliseconds that the lock covers, holds the lock
    until it is continued, and a takeover then waits and exits 4, as it does for a driver frozen in
    its job commit (docs/operations.md, "Fencing"). A test of a driver frozen in its write means
    outside both."""
    from sparkrecover.rundir import lease_lock

    with lease_lock.held(Run(os.path.basename(run_dir), run_dir)):
        os.killpg(pid, signal.SIGSTOP)


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


def install_runtime(tmp_path, plan=None, attempt=1) -> Runtime:
    """A driver Runtime journaling to a fresh run directory under tmp_path, installed as the current one."""
    from sparkrecover.driver.process import runtime
    from sparkrecover.driver.process.runtime import Runtime
    from sparkrecover.journal import JournalWriter
    from sparkrecover.journal import events as ev
    from sparkrecover.rundir import plans

    if isinstance(plan, dict):  # a plan as a test writes it: read the way the driver reads one
        plan = plans.parse_plan({"run": "run1", "attempt": attempt, **plan})
    run_dir = str(tmp_path / "root" / "run1")
    writer = JournalWriter(Run("run1", run_dir), attempt, ev.WRITER_DRIVER, flush_interval=0)
    rt = Runtime(writer, run_dir, plan)
    runtime.install(rt)
    return rt


def journal(rt: Runtime, event_type: str | None = None) -> list[dict]:
    """What the runtime journaled so far (flushed first), of one type if given."""
    rt.writer.flush()
    records = read_journal(rt.run_dir)
    return [r for r in records if event_type is None or r["type"] == event_type]


def jobs_of(spark, act):
    """(what act() returned, the Spark jobs it ran): a job group of its own, asked afterwards."""
    import uuid

    group = f"jobs-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "test")
    try:
        result = act()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return result, spark.sparkContext.statusTracker().getJobIdsForGroup(group)


def numbers(spark, n=100):
    """A small two-partition DataFrame: id and id % 7 as bucket."""
    return spark.range(n, numPartitions=2).selectExpr("id", "id % 7 AS bucket")


def fake_executable(path, body="exit 0") -> str:
    """A shell script at path running body: a stand-in for spark-submit."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return str(path)


def summary_counts(record: dict) -> dict:
    """The task counts of a spark.stage.completed record, shaped like the status tracker's."""
    return {key: record[key] for key in ("tasks", "completed_tasks", "failed_tasks")}
