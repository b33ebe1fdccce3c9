"""Shuffle map outputs kept on a cluster: a standalone master and two workers on loopback, each
with its own local directories, the app in client mode (tests/apps/shuffle_write.py, a join and
an aggregation whose map side is marked from inside), real SIGKILLs of the driver and of an
executor. The run root is a local folder both workers see (``--keep-shuffles copy``) or S3 (moto,
through s3a: ``auto``). Outputs are compared row for row with what one uninterrupted run writes;
partitions are counted from the markers each task leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable

import pytest

from sparkrecover.core.fold import kept_shuffles
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.journal import read_journal
from sparkrecover.rundir import keep, storage
from tests.cluster import Cluster
from tests.e2e.support import SHUFFLE_WRITE, kill_tree, needs_s3a, s3a_options
from tests.helpers import sparkrecover_command

pytestmark = pytest.mark.e2e
MAPS, WRITES, ROWS = 8, 8, 100  # ROWS: tests/apps/shuffle_write.py's rows per map partition
SLEEPS = {"SHUFFLE_MAP_SLEEP": "1", "SHUFFLE_WRITE_SLEEP": "1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster"), workers=2)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def expected() -> Counter:
    """The rows one uninterrupted run of the ``etl`` shape writes: per group, the ids' sum and the
    joined weights' sum."""
    totals: dict[int, list[int]] = {}
    for value in range(MAPS * ROWS):
        entry = totals.setdefault(value % (WRITES * 5), [0, 0])
        entry[0] += value
        entry[1] += 7 * (value % 50)
    return Counter((g, s, t) for g, (s, t) in totals.items())


def output(spark, out: str) -> Counter:
    return Counter((r.g, r.s, r.t) for r in spark.read.parquet(out).collect())


class Job:
    """One run of the app on the cluster: its command lines, markers and journal."""

    def __init__(
        self, cluster: Cluster, tmp_path, root: str, options: list[str], env: dict[str, str], secrets: list[str]
    ):
        self.cluster, self.root = cluster, root
        self.secrets = secrets  # redacted from the journal: given again to each resume
        self.run_dir = storage.join(root, "night")
        self.out, self.markers = str(tmp_path / "out"), str(tmp_path / "markers")
        self.log = tmp_path / "runs.log"  # every launch's output, shown when one fails
        self.options = ["--conf", "spark.ui.enabled=false", "--master", cluster.url, *options, *secrets]
        self.env = {**cluster.env, **SLEEPS, **env}

    def marked(self, kind: str, since_ns: int = 0) -> list[str]:
        """Tasks of ``kind`` (map, write) that computed their partition after ``since_ns``."""
        if not os.path.isdir(self.markers):
            return []
        return [m for m in os.listdir(self.markers) if m.split("-")[0] == kind and int(m.split("-")[3]) > since_ns]

    def state(self) -> RunState:
        return RunState.from_events("night", read_journal(self.run_dir))

    def kept(self) -> dict[int, dict]:
        """The map side's kept map outputs (the shuffle with MAPS map tasks), by map index."""
        left = [s for s in self.state().shuffles.values() if s.maps == MAPS]
        return left[0].kept if left else {}

    def launch(self, *command: str) -> subprocess.Popen:
        with open(self.log, "ab") as log:
            return subprocess.Popen(
                sparkrecover_command(*command),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
            )

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def submit(self, *submit_options: str) -> subprocess.Popen:
        args = [SHUFFLE_WRITE, self.out, self.markers, "etl", str(MAPS), str(WRITES)]
        return self.launch(
            "submit", "--root", self.root, "--run-id", "night", "--flush-interval", "0.2", *submit_options, "--",
            *self.options, *args,
        )  # fmt: skip

    def resume(self) -> subprocess.Popen:
        return self.launch("resume", "night", "--root", self.root, *(("--", *self.secrets) if self.secrets else ()))

    def wait(self, process: subprocess.Popen, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 400
        while not done():
            assert process.poll() is None, f"the run ended (exit {process.returncode}) early:\n{self.tail()}"
            assert time.monotonic() < deadline, "the kill point was not reached in time"
            time.sleep(0.2)

    def until(self, process: subprocess.Popen, done: Callable[[], bool]) -> int:
        """Wait for ``done()``, then SIGKILL the process and what it started; the time (ns) after
        which no task of the killed application runs: its executors are the workers' children, not
        the driver's, and may finish a task after the kill until the master releases them."""
        try:
            self.wait(process, done)
        finally:
            kill_tree(process.pid)
            process.wait(timeout=120)
        self.cluster.idle(timeout=120)
        return time.time_ns()

    def finish(self, process: subprocess.Popen) -> None:
        assert process.wait(timeout=900) == 0, f"exit {process.returncode}:\n{self.tail()}"


def files_of(job: Job) -> dict[str, int]:
    """Every file under the keep folder, by path relative to it, with its size."""
    size = keep.size_reader(job.run_dir)
    folder = keep.folder(job.run_dir)
    assert size is not None and folder is not None
    if storage.is_local(folder):
        found = {}
        for base, _, names in os.walk(folder):
            for name in names:
                relative = os.path.relpath(os.path.join(base, name), folder)
                found[relative] = os.path.getsize(os.path.join(base, name))
        return found
    from sparkrecover.rundir.keep import _files

    return _files(folder)


def assert_whole_and_journaled(job: Job, only_named: bool) -> None:
    """Each kept map output the journal names is whole in the keep folder (data, index, meta with
    the recorded sizes); with ``only_named``, the keep folder holds nothing else (every copy a
    record names, docs/decisions/0048-copies-after-an-executor-loss.md)."""
    files = files_of(job)
    # Every copy a record names: a map task Spark ran again (an executor lost) kept a second one.
    named = set(kept_shuffles.named_folders(job.state().shuffles))
    for shuffle in job.state().shuffles.values():
        for entry in shuffle.kept.values():
            path = entry["path"]
            assert files.get(f"{path}/data", 0) == entry["data_bytes"], path
            assert files.get(f"{path}/index") == entry["index_bytes"] and f"{path}/meta" in files, path
    if only_named:
        folders = {"/".join(name.split("/")[:2]) for name in files if name.count("/") >= 2}
        assert folders == named


def test_an_executor_lost_mid_map_and_two_driver_kills_on_a_shared_folder(tmp_path, cluster, spark):
    """``--keep-shuffles copy`` into a local root both workers see. An executor is SIGKILLed once
    it has finished map tasks: Spark runs its map outputs again, and the keep folder holds only
    whole copies, each journaled. The driver is killed in the write, the resume is killed in its
    write, and the last resume computes no map partition and writes what one run writes."""
    job = Job(cluster, tmp_path, str(tmp_path / "root"), [], {}, [])
    first = job.submit("--keep-shuffles", "copy")
    lost_executor: list[int] = []

    def executor_had_map_outputs() -> bool:
        local = cluster.worker_local_dir(1)
        shuffle_files = [name for _, _, names in os.walk(local) for name in names if name.endswith(".data")]
        # The small side's shuffle has two map tasks: a third file is one of the marked side's.
        if len(job.marked("map")) >= 4 and len(shuffle_files) >= 3 and len(job.kept()) >= 2:
            lost_executor.extend(cluster.executors(1))
            return bool(lost_executor)
        return False

    try:
        job.wait(first, executor_had_map_outputs)
    except AssertionError:
        kill_tree(first.pid)
        raise
    for pid in lost_executor:
        os.kill(pid, signal.SIGKILL)
    killed = job.until(first, lambda: len(job.marked("write")) >= 3)

    assert len(job.marked("map")) > MAPS  # the lost executor's map outputs were computed again
    assert any(e["type"] == "executor.lost" for e in read_journal(job.run_dir))
    assert sorted(job.kept()) == list(range(MAPS))
    assert_whole_and_journaled(job, only_named=False)

    second = job.resume()
    killed_again = job.until(second, lambda: len(job.marked("write", killed)) >= 2)
    assert job.marked("map", killed) == []  # every map output was reused
    assert_whole_and_journaled(job, only_named=True)  # the resume swept what no record names
    registered = [e for e in read_journal(job.run_dir) if e["type"] == "shuffle.registered" and e["attempt"] == 2]
    assert registered and all(e["reused"] == e["maps"] for e in registered)

    job.finish(job.resume())
    assert job.marked("map", killed_again) == []
    assert output(spark, job.out) == expected()
    assert not os.path.exists(keep.folder(job.run_dir) or "")  # removed: the run succeeded


@needs_s3a
def test_a_run_rooted_on_s3_keeps_map_outputs_there_across_kills(tmp_path, cluster, s3, spark):
    """The run directory on S3: ``auto`` copies each map output there (s3a), in the background.
    Killed once three map outputs are journaled, before the write, the resume computes exactly the
    map partitions not journaled; killed in its write, the last resume computes none; the output is
    one run's; the kept files are removed from S3."""
    import pyspark

    spark_3 = int(pyspark.__version__.split(".")[0]) < 4
    # The executors reach S3 with the credentials the driver has (EnvironmentVariableCredentialsProvider).
    credentials = [f"spark.executorEnv.{key}={value}" for key, value in s3.env().items()]
    credentials = [item for conf in credentials for item in ("--conf", conf)]
    job = Job(cluster, tmp_path, s3.prefix + "/runs", s3a_options(s3.endpoint), s3.env(), credentials)
    # Spark 3.5's executors need the jar on their class path: auto says so and keeps nothing.
    first = job.submit(*(("--keep-shuffles", "copy") if spark_3 else ()))
    # Copies to S3 take longer than these map tasks: some map tasks have ended unkept at the kill.
    killed = job.until(first, lambda: len(job.kept()) >= 3 and not job.marked("write"))
    kept = set(job.kept())
    assert len(kept) >= 3
    assert_whole_and_journaled(job, only_named=False)

    # Counted from the resume's start: a Python worker of the killed application may still mark a
    # task whose rows its JVM had sent just before the kill.
    resume_started = time.time_ns()
    second = job.resume()
    # Killed in its write, once its own map outputs are journaled (their copies end after the tasks).
    killed_again = job.until(second, lambda: len(job.marked("write", killed)) >= 2 and len(job.kept()) == MAPS)
    computed = {int(m.split("-")[1]) for m in job.marked("map", resume_started)}  # a retried task marks twice
    assert sorted(computed) == sorted(set(range(MAPS)) - kept)

    job.finish(job.resume())
    assert job.marked("map", killed_again) == []
    assert output(spark, job.out) == expected()
    assert keep.disk_usage(job.run_dir) is None  # removed from S3: the run succeeded
