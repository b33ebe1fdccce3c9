"""End to end on real Spark: a resume you can trust (stale stages, leases, retries, cron, secrets)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import orjson
import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import APPS, PIPELINE, TINY, freeze_group, side_by_side, submit_and_kill, submit_command
from tests.helpers import SPARK_OPTIONS, decisions, events_of, run_cli, sparkrecover_command, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def tiny_input(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("a,1\nb,2\na,3\n")
    return str(path)


def submit_tiny(root, run_id, *app_args, options=(), env=None):
    return run_cli(
        "submit", "--root", root, "--run-id", run_id, *options, "--", *SPARK_OPTIONS, TINY, *app_args, env=env
    )


def stage_events(run_dir, attempt, types=("stage.skipped", "stage.invalidated", "stage.committed")):
    return [
        (e["type"], e["stage"], e.get("reason"))
        for e in events_of(run_dir)
        if e["attempt"] == attempt and e["type"] in types
    ]


def test_changed_code_reruns_that_stage_and_downstream_only(tmp_path):
    app, edited = tmp_path / "pipeline.py", tmp_path / "edited.py"
    shutil.copy(PIPELINE, app)
    edited.write_text(app.read_text().replace('where("amount > 0")', 'where("amount > 500")'))
    assert edited.read_text() != app.read_text()
    root, out, scratch = str(tmp_path / "root"), str(tmp_path / "out"), tmp_path / "scratch"
    # The edited script under plain spark-submit, beside the run that is killed before the edit.
    plain, run_dir = side_by_side(
        lambda: subprocess.run(
            [find_spark_submit(), *SPARK_OPTIONS, str(edited), str(scratch), "--rows", "20000"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        ),
        lambda: submit_and_kill(root, "edited", [out, "--rows", "20000"], after_stage="daily", app=str(app)),
    )
    app.write_text(edited.read_text())
    result = run_cli("resume", "edited", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert stage_events(run_dir, 2) == [
        ("stage.skipped", "orders", "committed in attempt 1, output verified"),
        ("stage.invalidated", "clean", "code changed"),
        ("stage.committed", "clean", None),
        ("stage.invalidated", "daily", "upstream changed (clean)"),
        ("stage.committed", "daily", None),
        ("stage.committed", "publish", None),
    ]
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == (scratch / "report.txt").read_text()


def test_changed_input_file_is_seen_before_launch_and_a_second_resume_of_a_live_run_is_refused(tmp_path, tiny_input):
    """One killed run for two claims that would each need their own: the resume sees the changed
    input before it launches anything, and a second resume while it runs is refused."""
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    died = submit_tiny(root, "inputs", tiny_input, report, "--die-once", str(tmp_path / "died"))
    assert died.returncode == 137, died.stderr[-3000:]
    run_dir = os.path.join(root, "inputs")
    # A changed input file is seen before launch.
    with open(tiny_input, "a") as handle:
        handle.write("c,5\n")
    decision, reason = decisions(root, "inputs")["load"]
    assert (decision, reason) == ("rerun", f"input changed: {tiny_input}")
    first = subprocess.Popen(
        sparkrecover_command("resume", "inputs", "--root", root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A second resume of a live run is refused.
        wait_for(run_dir, "driver.started", process=first, attempt=2)
        second = run_cli("resume", "inputs", "--root", root)
        assert second.returncode == 4
        assert f"is being run by pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
    finally:
        assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]
    assert sorted({e["attempt"] for e in events_of(run_dir)}) == [1, 2]
    assert open(report).read() == "a,4\nb,2\nc,5\n"


def test_retries_stop_when_an_attempt_makes_no_progress(tmp_path, tiny_input):
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    result = submit_tiny(root, "doomed", tiny_input, report, "--fail-in", "total", options=["--max-attempts", "3"])
    assert result.returncode == 1
    assert "not retrying: attempt 2 made no progress: stage total failed again with the same error" in result.stderr
    assert sorted({e["attempt"] for e in events_of(os.path.join(root, "doomed"))}) == [1, 2]


def test_a_killed_driver_is_retried_and_cron_can_repeat_the_line(tmp_path, tiny_input):
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    env = {**os.environ, "MY_API_TOKEN": "PLANTED-SECRET-ENV"}
    app_args = [tiny_input, report, "--die-once", str(tmp_path / "died"), "--password", "PLANTED-SECRET-ARG"]
    secret_conf = ["--conf", "spark.hadoop.fs.s3a.secret.key=PLANTED-SECRET-CONF"]
    line = ["submit", "--root", root, "--run-id", "nightly", "--max-attempts", "3", "--checksums", "--"]
    line += [*SPARK_OPTIONS, *secret_conf, TINY, *app_args]
    first = run_cli(*line, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = os.path.join(root, "nightly")
    assert [
        (a, e["exit_code"]) for a, e in ((e["attempt"], e) for e in events_of(run_dir)) if e["type"] == "attempt.ended"
    ] == [(1, 137), (2, 0)]
    assert open(report).read() == "a,4\nb,2\n"
    assert run_cli("resume", "nightly", "--root", root, "--dry-run", "--verify", "checksum").returncode == 0

    again = run_cli(*line, env=env)  # cron runs the same line again
    assert again.returncode == 0 and "already completed successfully" in again.stderr
    assert max(e["attempt"] for e in events_of(run_dir)) == 2

    for folder, _, names in os.walk(run_dir):
        for name in names:
            with open(os.path.join(folder, name), "rb") as handle:
                assert b"PLANTED-SECRET" not in handle.read(), os.path.join(folder, name)


def test_retries_stop_when_a_failure_outside_any_stage_repeats(tmp_path, tiny_input):
    # Attempt 1 commits every stage, then the script exits 3 outside any stage; attempt 2 skips
    # them all, commits nothing and exits 3 again: a third attempt would only do the same.
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    result = submit_tiny(root, "outside", tiny_input, report, "--exit-at-end", "3", options=["--max-attempts", "3"])
    assert result.returncode == 3, result.stderr[-3000:]
    assert "not retrying: attempt 2 made no progress: it ended again with exit code 3" in result.stderr
    assert sorted({e["attempt"] for e in events_of(os.path.join(root, "outside"))}) == [1, 2]
    assert open(report).read() == "a,4\nb,2\n"


def test_resume_from_scratch_runs_every_stage_of_a_damaged_journal(tmp_path, tiny_input):
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    died = submit_tiny(root, "damaged", tiny_input, report, "--die-once", str(tmp_path / "died"))
    assert died.returncode == 137, died.stderr[-3000:]
    run_dir = os.path.join(root, "damaged")
    segment = os.path.join(run_dir, "journal", "0001-driver-000000.jsonl")
    with open(segment, "rb") as handle:
        lines = handle.read().split(b"\n")
    with open(segment, "wb") as handle:
        handle.write(b"\n".join([lines[0], b"\x00\x00 damaged \x00", *lines[1:]]))
    refused = run_cli("resume", "damaged", "--root", root)
    assert refused.returncode == 3 and f"{segment}:2" in refused.stderr
    resumed = run_cli("resume", "damaged", "--root", root, "--from-scratch")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert os.listdir(os.path.join(run_dir, "journal.damaged")) == ["0001-driver-000000.jsonl"]
    assert stage_events(run_dir, 2) == [
        ("stage.committed", "load", None),
        ("stage.committed", "total", None),
        ("stage.committed", "report", None),
    ]
    assert open(report).read() == "a,4\nb,2\n"


def _group_signal(process, signum):
    os.killpg(process.pid, signum)


def _thaw(old, timeout: float) -> tuple[int, str]:
    """Continue a frozen run's process group (SIGCONT) and wait for it to end; whatever is left
    after ``timeout`` is killed. Its exit code and stderr."""
    with contextlib.suppress(ProcessLookupError):
        _group_signal(old, signal.SIGCONT)
    try:
        code = old.wait(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            _group_signal(old, signal.SIGKILL)
    return code, old.stderr.read()


def submit_with_a_short_lease(root: str, app: str, *app_args: str) -> subprocess.Popen:
    """Submit run ``frozen`` in a process group of its own, its lease's TTL 3 s (a freeze outlives
    it in seconds), its stderr kept for ``_thaw``."""
    return subprocess.Popen(
        submit_command(root, "frozen", app, *app_args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "SPARKRECOVER_LEASE_TTL": "3"},
    )


def test_a_driver_whose_lease_was_taken_over_commits_nothing_more(tmp_path, tiny_input):
    """Fencing: the first run is frozen (SIGSTOP, like a paused VM) past its
    lease's TTL between two stages, a resume takes the run over and finishes it; continued
    (SIGCONT), the old driver finds its lease gone before its next stage writes, journals
    lease.lost and exits 75 with nothing more committed, and the output is a clean run's."""
    from sparkrecover.errors import EXIT_LEASE_LOST

    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    run_dir = os.path.join(root, "frozen")
    old = submit_with_a_short_lease(root, TINY, tiny_input, report, "--pause-once", str(tmp_path / "paused"), "8")
    try:
        wait_for(run_dir, "stage.committed", "load", process=old)
        freeze_group(old.pid, run_dir)
        import time

        time.sleep(4)  # past the TTL: the frozen CLI's heartbeat is stale
        resumed = run_cli("resume", "frozen", "--root", root)
        assert resumed.returncode == 0, (
            resumed.stderr[-3000:],
            open(os.path.join(run_dir, "lease.json")).read(),
            time.time(),
        )
        assert "took over the stale lease" in resumed.stderr
        assert open(report).read() == "a,4\nb,2\n"
        written = os.stat(report).st_mtime_ns  # whatever the old driver writes from now on would show
        clean = {e["stage"] for e in events_of(run_dir) if e["type"] == "stage.committed" and e["attempt"] == 2}
        assert clean == {"total", "report"}
    finally:
        code, stderr = _thaw(old, timeout=120)
    assert code == EXIT_LEASE_LOST, stderr[-3000:]
    assert "lost the run's lease" in stderr
    first = [e for e in events_of(run_dir) if e["attempt"] == 1]
    assert [e["stage"] for e in first if e["type"] in ("stage.started", "stage.committed")] == ["load", "load"]
    assert [e["type"] for e in first if e["type"] == "lease.lost"] == ["lease.lost"]
    assert os.stat(report).st_mtime_ns == written and open(report).read() == "a,4\nb,2\n"
    assert decisions(root, "frozen") == {
        "load": ("skip", "committed in attempt 1, output verified"),
        "total": ("skip", "committed in attempt 2, output verified"),
        "report": ("skip", "committed in attempt 2, output verified"),
    }


FROZEN_APPEND = os.path.join(APPS, "frozen_append.py")


def _files(folder):
    """Every file under ``folder`` (hidden ones too) with its size and modification time."""
    found = {}
    for where, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(where, name)
            found[os.path.relpath(path, folder)] = (os.path.getsize(path), os.stat(path).st_mtime_ns)
    return found


def _ids(folder):
    ids = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("part-"):
            with open(os.path.join(folder, name)) as handle:
                ids += [orjson.loads(line)["id"] for line in handle if line.strip()]
    return sorted(ids)


def test_a_driver_frozen_inside_a_write_does_not_commit_it_after_a_takeover(tmp_path):
    """Fencing, the gap the Python checks leave: the driver is frozen (SIGSTOP) inside an
    append, before its write tasks ran, past its lease's TTL; a resume takes the run over and
    appends the rows once. Continued, the old driver's Spark job runs to its job commit, which
    reads the lease in the JVM and refuses: Spark aborts the job, the driver journals lease.lost
    and exits 75, and the output keeps exactly the files the resume left (the rows once)."""
    from sparkrecover.errors import EXIT_LEASE_LOST

    root, out, marker = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "paused")
    run_dir = os.path.join(root, "frozen")
    old = submit_with_a_short_lease(root, FROZEN_APPEND, out, marker, "6")
    import time

    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(marker):  # the UDF of the append's map stage is running
            assert old.poll() is None and time.monotonic() < deadline, old.stderr.read()[-3000:]
            time.sleep(0.05)
        freeze_group(old.pid, run_dir)
        time.sleep(4)  # past the TTL
        resumed = run_cli("resume", "frozen", "--root", root)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "took over the stale lease" in resumed.stderr
        assert _ids(out) == list(range(40)) + list(range(100, 105))
        left = _files(out)
    finally:
        code, stderr = _thaw(old, timeout=180)
    assert code == EXIT_LEASE_LOST, stderr[-3000:]
    assert _files(out) == left  # not a file added, removed or rewritten: the rows once
    assert _ids(out) == list(range(40)) + list(range(100, 105))
    assert "this driver lost the run's lease" in stderr and "job commit" in stderr, stderr[-3000:]
    first = [e for e in events_of(run_dir) if e["attempt"] == 1]
    lost = [e for e in first if e["type"] == "lease.lost"]
    assert len(lost) == 1 and lost[0]["doing"] == "the job commit"
    appended = lost[0]["stage"]
    assert [e["type"] for e in first if e.get("stage") == appended and e["type"].startswith("stage.")] == [
        "stage.started"
    ]
    assert [e["exit_code"] for e in first if e["type"] == "driver.ended"] == [EXIT_LEASE_LOST]
