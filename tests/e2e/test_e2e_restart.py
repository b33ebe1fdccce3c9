"""A driver restarted by something other than sparkrecover resumes by itself (docs/launchers.md).

YARN and Kubernetes cannot run here; what they do when a driver dies is run the same driver command
again, and these tests do exactly that, with real spark-submit, real kills and the real journal:
the command ``submit`` recorded, the line ``spark-submit-args`` prints, YARN's second application
attempt under a waiting ``submit``, two restarts at once, a frozen predecessor, and a restart with
its journal on S3 and its script edited. Partitions are counted from inside (each computed one
leaves a marker file) and outputs compared row for row.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import orjson
import pytest

from sparkrecover.journal.segments import list_segments
from sparkrecover.launch.launcher import find_spark_submit
from sparkrecover.rundir import storage
from tests import journals
from tests.e2e.support import (
    FLUSH_OFTEN,
    ONE_WRITE,
    PARTS,
    Hold,
    computed_since,
    freeze_group,
    submit_command,
    task_commits,
    wait_until,
)
from tests.helpers import SPARK_OPTIONS, events_of, run_cli

pytestmark = pytest.mark.e2e


def driver_env(**extra: str) -> dict[str, str]:
    """What a launcher's environment must give the driver: a Python that imports sparkrecover."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **extra}


def held_env(tmp_path, first: int, **extra: str) -> dict[str, str]:
    """``driver_env`` whose one_write.py tasks hold from partition ``first`` on, without sleeping."""
    return Hold(tmp_path).env(first, driver_env(**extra), ONE_WRITE_SLEEP="0")


def commits(run_dir: str) -> int:
    """Partitions attempt 1 computed and committed so far in the overwrite."""
    return task_commits(run_dir, 1, "overwrite")


def start(command: list[str], folder: str, name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A process group of its own (so a kill takes spark-submit, its JVM and the Python driver),
    its output in files beside the test's other files."""
    with open(os.path.join(folder, f"{name}.out"), "wb") as out, open(os.path.join(folder, f"{name}.err"), "wb") as err:
        return subprocess.Popen(command, stdout=out, stderr=err, env=env or driver_env(), start_new_session=True)


def said(folder: str, name: str) -> str:
    """What a process printed (spark-submit hands the Python driver's stderr to its own stdout)."""
    text = ""
    for stream in ("out", "err"):
        with open(os.path.join(folder, f"{name}.{stream}"), encoding="utf-8", errors="replace") as handle:
            text += handle.read()
    return text


def kill(process: subprocess.Popen) -> int:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    return time.time_ns()


def finish(process: subprocess.Popen, timeout: float = 900) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(process)
        raise


def rows(spark, folder: str) -> list[tuple[int, int]]:
    return sorted((r.id, r.tripled) for r in spark.read.parquet(folder).collect())


def written_whole(spark, out: str, staging: bool = False) -> None:
    """The target as one uninterrupted write leaves it: every row once, one file per partition, and
    (unless ``staging`` may remain) no committer's staging folder."""
    assert rows(spark, out) == [(i, i * 3) for i in range(PARTS * 100)]
    data = sorted(n for n in os.listdir(out) if n.startswith("part-"))
    assert sorted({n[:10] for n in data}) == [f"part-{p:05d}" for p in range(PARTS)] and len(data) == PARTS
    assert staging or "_temporary" not in os.listdir(out)


def handoff(
    root: str,
    app: str,
    out: str,
    markers: str,
    *given: str,
    parts: int = PARTS,
    run_id: str = "night",
    variant: str = "overwrite",
) -> list[str]:
    """The whole command a launcher runs: its own options, then what spark-submit-args printed."""
    result = run_cli(
        "spark-submit-args", "--root", root, "--run-id", run_id, *given, "--", app, out, markers, str(parts), variant
    )
    assert result.returncode == 0, result.stderr
    return [find_spark_submit(), *SPARK_OPTIONS, *shlex.split(result.stdout)]


def kept_by(run_dir: str, attempt: int) -> int:
    (started,) = [e for e in events_of(run_dir) if e["type"] == "write.started" and e["attempt"] == attempt]
    return len(started["kept"])


def test_the_recorded_driver_command_run_again_resumes_and_never_appends_twice(spark, tmp_path):
    """The issue's reproduction: a script appends 1,000 rows then overwrites a target; submit's
    driver is killed in the overwrite; the command submit recorded (attempt.started) is run again,
    as YARN's second application attempt runs it. The append is not repeated, the overwrite keeps
    its committed partitions, the journal has two attempts; the command once more runs nothing."""
    folder, root, out, markers = str(tmp_path), str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "m")
    run_dir = os.path.join(root, "night")
    app_args = [out, markers, str(PARTS), "append-then-overwrite"]
    command = submit_command(root, "night", ONE_WRITE, *app_args, submit_options=FLUSH_OFTEN)
    submit = start(command, folder, "submit", held_env(tmp_path, 7))
    wait_until(submit, lambda: commits(run_dir) >= 7, "7 partitions of the overwrite committed", 400)
    killed_at = kill(submit)
    (recorded,) = [e for e in events_of(run_dir) if e["type"] == "attempt.started"]

    again = start(recorded["command"], folder, "again")
    assert finish(again) == 0, said(folder, "again")[-3000:]
    assert "this driver resumes it as attempt 2 (1 skip, 1 continue)" in said(folder, "again")
    # ... on spark-submit's stderr: the application's stdout (where PythonRunner copies the Python
    # driver's stdout and stderr) holds no line of sparkrecover's, as in a plain run.
    with open(os.path.join(folder, "again.out"), encoding="utf-8", errors="replace") as handle:
        assert "sparkrecover:" not in handle.read()
    records = events_of(run_dir)
    assert [(e["attempt"], e["writer"], e["started_by"]) for e in records if e["type"] == "attempt.started"] == [
        (1, "cli", "submit"),
        (2, "driver", "launcher"),
    ]
    assert [e["stage"].split()[1] for e in records if e["type"] == "stage.skipped"] == ["append"]
    kept = kept_by(run_dir, 2)
    assert kept == 7
    assert len(computed_since(markers, killed_at)) == PARTS - kept
    assert spark.read.parquet(out + "-log").count() == 1000  # appended once: 2,000 before the fix
    written_whole(spark, out)
    shown = orjson.loads(run_cli("inspect", "night", "--root", root, "--json").stdout)
    assert [(a["outcome"], a["started_by"]) for a in shown["attempts"]] == [
        ("crashed", "submit"),
        ("succeeded", "launcher"),
    ]
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))

    computed = len(os.listdir(markers))
    third = start(recorded["command"], folder, "third")
    assert finish(third) == 0, said(folder, "third")[-3000:]
    assert "run night already completed successfully: this driver runs nothing" in said(folder, "third")
    assert "SparkContext" not in said(folder, "third")
    assert len(os.listdir(markers)) == computed
    assert max(s.attempt for s in list_segments(run_dir)) == 2


def test_the_same_spark_submit_args_line_resumes_then_runs_nothing(spark, tmp_path):
    """``spark-submit <options> $(sparkrecover spark-submit-args ...)`` killed at 70 % of one write
    after a round-robin repartition: the identical line again reuses every kept map output and
    commits only the missing write partitions; a third time, nothing."""
    folder, root, out, markers = str(tmp_path), str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "m")
    run_dir = os.path.join(root, "night")
    # --keep-shuffles link: kept map outputs need no master given, and the restart then points the
    # JVM at its own reuse list and script digest.
    line = handoff(root, ONE_WRITE, out, markers, *FLUSH_OFTEN, "--keep-shuffles", "link", variant="shuffled")
    assert "spark.shuffle.manager=sparkrecover.jvm.shuffle.KeepingShuffleManager" in line

    first = start(line, folder, "first", held_env(tmp_path, 11))
    wait_until(first, lambda: commits(run_dir) >= 11, "11 of 16 partitions committed", 400)
    killed_at = kill(first)
    second = start(line, folder, "second")
    assert finish(second) == 0, said(folder, "second")[-3000:]
    kept = kept_by(run_dir, 2)
    assert kept == 11
    registered = [e for e in events_of(run_dir) if e["type"] == "shuffle.registered" and e["attempt"] == 2]
    assert registered and all(e["reused"] == e["maps"] for e in registered)
    assert computed_since(markers, killed_at) == set()  # the markers are the map side's: all reused
    # Spark's driver log (its own default configuration here, at INFO) lacks the ERROR it logs for
    # a map stage whose outputs were all reused, and only that: DAGScheduler's other lines remain.
    assert "INFO DAGScheduler: Job " in said(folder, "second")
    assert "No stages registered" not in said(folder, "second"), said(folder, "second")[-3000:]
    written_whole(spark, out)

    computed = len(os.listdir(markers))
    third = start(line, folder, "third")
    assert finish(third) == 0, said(folder, "third")[-3000:]
    assert "already completed successfully" in said(folder, "third")
    assert len(os.listdir(markers)) == computed
    records = events_of(run_dir)
    assert [e["started_by"] for e in records if e["type"] in ("run.started", "attempt.started")] == ["launcher"] * 3
    assert [e["exit_code"] for e in records if e["type"] == "attempt.ended"] == [0]


# YARN's next application attempt runs the same command line while spark-submit (and with it
# submit) still waits for the application: this spark-submit does exactly that, the first of its
# two drivers killed once some partitions were computed.
YARN = """#!{python}
import os, signal, subprocess, sys, time
real, markers = os.environ["REAL_SPARK_SUBMIT"], os.environ["YARN_MARKERS"]
first = subprocess.Popen([real, *sys.argv[1:]], start_new_session=True)
while first.poll() is None and (not os.path.isdir(markers) or len(os.listdir(markers)) < 8):
    time.sleep(0.05)
os.killpg(first.pid, signal.SIGKILL)
first.wait()
sys.exit(subprocess.call([real, *sys.argv[1:]]))
"""


def test_yarns_next_attempt_under_a_waiting_submit_resumes_under_its_lease(spark, tmp_path):
    folder, root, out, markers = str(tmp_path), str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "m")
    run_dir = os.path.join(root, "night")
    yarn = str(tmp_path / "yarn-submit")
    with open(yarn, "w") as handle:
        handle.write(YARN.format(python=sys.executable))
    os.chmod(yarn, 0o755)
    env = driver_env(REAL_SPARK_SUBMIT=find_spark_submit(), YARN_MARKERS=markers)
    submit = start(
        submit_command(
            root, "night", ONE_WRITE, out, markers, str(PARTS), submit_options=("--spark-submit", yarn, *FLUSH_OFTEN)
        ),
        folder,
        "submit",
        env,
    )  # fmt: skip
    assert finish(submit) == 0, said(folder, "submit")[-3000:]
    err = said(folder, "submit")
    assert "the driver of attempt 1 stopped and the cluster restarted it: attempt 2 carried the run on (exit 0)" in err
    assert "run night: succeeded (exit 0), attempts 1-2" in err
    assert "took over" not in err  # the restarted driver ran under submit's lease
    records = events_of(run_dir)
    assert [(e["attempt"], e["writer"], e["started_by"]) for e in records if e["type"] == "attempt.started"] == [
        (1, "cli", "submit"),
        (2, "driver", "launcher"),
    ]
    ended = {e["attempt"]: e for e in records if e["type"] == "attempt.ended"}
    assert (ended[1]["exit_code"], ended[1]["continued_by"], ended[1]["application_exit_code"]) == (None, 2, 0)
    assert ended[2]["exit_code"] == 0
    shown = orjson.loads(run_cli("inspect", "night", "--root", root, "--json").stdout)
    assert [a["outcome"] for a in shown["attempts"]] == ["crashed", "succeeded"]
    # Every partition the first driver committed was kept, and none of those computed again.
    committed = {e["partition"] for e in records if e["type"] == "task.committed" and e["attempt"] == 1}
    (resumed,) = [e for e in records if e["type"] == "write.started" and e["attempt"] == 2]
    assert set(resumed["kept"]) == committed and committed
    computed = collections.Counter(int(name.split("-")[0]) for name in os.listdir(markers))
    assert set(computed) == set(range(PARTS)) and all(computed[p] == 1 for p in committed)
    written_whole(spark, out)


def test_two_restarts_wait_out_a_fresh_lease_of_a_gone_driver_then_one_runs(tmp_path):
    """A driver on another host died with its lease fresh: two restarts of the run start at once,
    both say they wait for the lease to go stale, then one takes it over and resumes, and the other
    exits 4 having written nothing. (The dead attempt is a journal written by the test's own
    writers: what matters here is the lease and the attempt number, not what it had done.)"""
    folder, root, out, markers = str(tmp_path), str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "m")
    run_dir = journals.crashed_run(root).dir
    lease = {
        "v": 1, "run": "nightly", "host": "gone-host", "pid": 4242, "user": "etl", "token": "gone-host:4242:1",
        "ttl_s": 600.0, "heartbeat": "just now", "heartbeat_epoch": time.time(),
    }  # fmt: skip
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(lease))
    line = handoff(root, ONE_WRITE, out, markers, "--keep-shuffles", "off", parts=4, run_id="nightly")

    racers = [start(line, folder, name) for name in ("a", "b")]
    for racer, name in zip(racers, "ab", strict=True):
        wait_until(racer, lambda name=name: "waiting up to" in said(folder, name), f"driver {name} waiting", 400)
    lease["ttl_s"] = 1.0  # the same holder and heartbeat, now stale: both see it go at once
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(lease))
    codes = sorted((finish(racer), name) for racer, name in zip(racers, "ab", strict=True))
    assert [code for code, _ in codes] == [0, 4], [said(folder, name)[-2000:] for name in "ab"]
    winner, loser = said(folder, codes[0][1]), said(folder, codes[1][1])
    assert "took over the stale lease of pid 4242 on gone-host" in winner
    assert "which took or renewed its lease while this driver looked" in loser
    assert sorted({s.attempt for s in list_segments(run_dir)}) == [1, 2]
    assert os.listdir(os.path.join(run_dir, "plans")) == ["0002.json"]
    assert len(os.listdir(markers)) == 4


def test_a_frozen_predecessor_continued_after_its_successor_ran_commits_nothing(spark, tmp_path):
    """The first driver of a spark-submit-args line, frozen (SIGSTOP) in its write, stops renewing
    its lease; the same line again waits out the TTL, takes the run over and finishes it; the
    first driver, continued, commits nothing (its job commit is refused: exit 75)."""
    folder, root, out, markers = str(tmp_path), str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "m")
    run_dir = os.path.join(root, "night")
    env = driver_env(SPARKRECOVER_LEASE_TTL="6")
    line = handoff(root, ONE_WRITE, out, markers, *FLUSH_OFTEN, "--keep-shuffles", "off")
    first = start(line, folder, "first", held_env(tmp_path, 5, SPARKRECOVER_LEASE_TTL="6"))
    wait_until(first, lambda: commits(run_dir) >= 5, "5 partitions committed", 400)
    freeze_group(first.pid, run_dir)  # in its write: its next tasks wait for the release below
    try:
        second = start(line, folder, "second", env)
        assert finish(second) == 0, said(folder, "second")[-3000:]
    finally:
        os.killpg(first.pid, signal.SIGCONT)
        Hold(tmp_path).release()
    assert finish(first) == 75, said(folder, "first")[-3000:]
    # Whether it waited depends on how long its JVM took to start (the lease goes stale 6 s
    # after the freeze): either way it took the lease over from the frozen driver.
    assert "took over the stale lease of pid" in said(folder, "second")
    lost = [e for e in events_of(run_dir) if e["type"] == "lease.lost"]
    assert [(e["attempt"], e["doing"]) for e in lost] == [(1, "the job commit")]
    # Its refused job was aborted; a task of it that Spark was still killing may leave an empty
    # staging folder behind, never a file in the target (docs/decisions/0037-restarted-drivers.md).
    written_whole(spark, out, staging=True)


def test_a_restart_on_s3_with_its_script_edited_reruns_the_write_and_leaves_earlier_objects_alone(spark, tmp_path, s3):
    """The journal on S3, where a flush rewrites a segment object whole: the restart writes only
    objects of its own attempt. The script was edited in between: the write's kept partitions
    would not hold what the new code computes, so it runs whole, saying why."""
    folder, out, markers = str(tmp_path), str(tmp_path / "out"), str(tmp_path / "m")
    app = str(tmp_path / "one_write.py")
    shutil.copy(ONE_WRITE, app)
    root = s3.prefix
    run_dir = storage.join(root, "night")
    line = handoff(root, app, out, markers, *FLUSH_OFTEN, "--keep-shuffles", "off")
    first = start(line, folder, "first", held_env(tmp_path, 5))
    wait_until(first, lambda: commits(run_dir) >= 5, "5 partitions committed", 400)
    kill(first)
    before = {s.name: storage.read_bytes(s.url) for s in list_segments(run_dir)}
    with open(app, "a") as handle:
        handle.write("# edited after the crash\n")

    second = start(line, folder, "second")
    assert finish(second) == 0, said(folder, "second")[-3000:]
    assert {s.name: storage.read_bytes(s.url) for s in list_segments(run_dir) if s.name in before} == before
    assert {s.attempt for s in list_segments(run_dir)} == {1, 2}
    (started,) = [e for e in events_of(run_dir) if e["type"] == "write.started" and e["attempt"] == 2]
    assert started["kept"] == [] and "the script's code" in started["reason"]
    assert len({int(name.split("-")[0]) for name in os.listdir(markers)}) == PARTS
    written_whole(spark, out)
