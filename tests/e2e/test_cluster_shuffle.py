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
from tests.e2e.support import SHUFFLE_WRITE, Hold, kill_tree, needs_s3a, s3a_options
from tests.helpers import spark_events, sparkrecover_command
from tests.s3server import REQUESTS

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
        self,
        cluster: Cluster,
        tmp_path,
        root: str,
        options: list[str],
        env: dict[str, str],
        secrets: list[str],
        shape: str = "etl",
    ):
        self.cluster, self.root, self.shape = cluster, root, shape
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
        args = [SHUFFLE_WRITE, self.out, self.markers, self.shape, str(MAPS), str(WRITES)]
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


def served_events(job: Job) -> list[dict]:
    return [e for e in read_journal(job.run_dir) if e["type"] == "shuffle.served"]


def test_an_executor_lost_mid_map_and_two_driver_kills_on_a_shared_folder(tmp_path, cluster, spark):
    """``--keep-shuffles copy`` into a local root both workers see. The map tasks of partitions 4
    on are held; once partitions 0-3 are journaled kept, the executor that wrote some of them is
    SIGKILLed: those are served from their copies (any whose copy was not yet durable would be
    computed again), its held task runs again, and the keep folder holds only whole copies, each
    journaled. The driver is killed in the write, the resume is killed in its write, and the last
    resume computes no map partition and writes what one run writes."""
    maps = Hold(tmp_path / "maps")
    (tmp_path / "maps").mkdir()
    job = Job(cluster, tmp_path, str(tmp_path / "root"), [], {"HOLD_MAPS": f"4:{maps.path}"}, [])
    first = job.submit("--keep-shuffles", "copy")
    try:
        job.wait(first, lambda: sorted(job.kept()) == [0, 1, 2, 3] and len(job.marked("map")) == 6)
    except AssertionError:
        kill_tree(first.pid)
        raise
    # The executor that wrote kept map outputs: a shuffle file's name holds its map task's id, as
    # does the folder of that output's copy.
    kept_tasks = {str(e["path"]).split("-t")[-1].split("-")[0] for e in job.kept().values()}
    worker = next(
        index
        for index in (1, 0)
        if any(name.split("_")[2] in kept_tasks for _, _, names in os.walk(cluster.worker_local_dir(index))
               for name in names if name.endswith(".data"))
    )  # fmt: skip
    for pid in cluster.executors(worker):
        os.kill(pid, signal.SIGKILL)
    job.wait(first, lambda: bool(served_events(job)))
    maps.release()
    killed = job.until(first, lambda: len(job.marked("write")) >= 3)

    lost = [e for e in served_events(job) if e["maps"] == MAPS]
    served = {m for e in lost for m in e["served"]}
    again = {m for e in lost for m in e["recomputed"]}
    runs = Counter(int(m.split("-")[1]) for m in job.marked("map"))
    assert served and not {m for m in served if runs[m] > 1}  # served from their copies, not computed
    assert all(runs[m] == 2 for m in again)  # their copies were not durable yet: computed again
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
    # Kept blocks are read with ranged GETs of a data file whose length its index gives: no HEAD
    # per block (docs/decisions/0054).
    folder = s3.prefix.split("/", 3)[3]
    data_reads = [
        (method, path) for method, path in REQUESTS if folder in path and path.partition("?")[0].endswith("/data")
    ]
    assert any(method == "GET" for method, _ in data_reads)  # kept blocks were read from S3
    assert [path for method, path in data_reads if method == "HEAD"] == []


@pytest.mark.parametrize("shape", ["etl", "indeterminate"])
def test_an_executor_lost_after_the_map_stage_is_served_from_copies(tmp_path, cluster, spark, shape):
    """Every map output is journaled kept and the write's tasks are held in flight; one worker's
    executor is SIGKILLed. The driver serves its map outputs from their copies (shuffle.served):
    Spark's event log shows each map partition of each shuffle computed exactly once, and the
    output is one uninterrupted run's. An INDETERMINATE shuffle (a round-robin ``repartition``
    after the aggregation) is not kept: its map outputs on the lost executor run again, as in
    Spark without sparkrecover. In a shared local folder: the same with the root on S3 is
    test_cluster_executor_loss.py's ``[s3-True]``, which then kills the driver and resumes too."""
    events = tmp_path / "events"
    events.mkdir()
    logging = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}"]
    logging += ["--conf", "spark.eventLog.compress=false"]
    hold = Hold(tmp_path)
    job = Job(cluster, tmp_path, str(tmp_path / "root"), logging, hold.env(0, {}), [], shape)
    first = job.submit("--keep-shuffles", "copy")

    def all_kept_and_writing() -> bool:
        shuffles = list(job.state().shuffles.values())
        return len(shuffles) >= 2 and all(len(s.kept) == s.maps for s in shuffles) and len(job.marked("write")) >= 2

    try:
        job.wait(first, all_kept_and_writing)
        lost = cluster.executors(1)
        assert lost
        for pid in lost:
            os.kill(pid, signal.SIGKILL)
        job.wait(first, lambda: bool(served_events(job)))
        if shape == "indeterminate":
            # Held until Spark has rolled the write back (a new write task of the retried stage
            # marked its partition): a write partition finished before that would make Spark
            # fail the job instead ("cannot rollback the ResultStage"), with or without sparkrecover.
            job.wait(first, lambda: len(job.marked("write")) >= 3)
    except AssertionError:
        kill_tree(first.pid)
        raise
    hold.release()
    job.finish(first)

    served = served_events(job)
    kept = [e for e in served if e["shuffle"] is not None]
    assert sum(len(e["served"]) for e in kept) > 0
    assert all(e["recomputed"] == [] for e in kept), served
    registered = [e for e in read_journal(job.run_dir) if e["type"] == "shuffle.registered"]
    ended = spark_events(str(events), "app-", "SparkListenerTaskEnd")
    map_tasks = [e for e in ended if e["Task Type"] == "ShuffleMapTask" and e["Task End Reason"]["Reason"] == "Success"]
    if shape == "etl":
        assert len(map_tasks) == sum(e["maps"] for e in registered)  # no map task ran twice
    else:
        (unkept,) = [e for e in served if e["shuffle"] is None]
        assert unkept["served"] == [] and unkept["recomputed"]
        assert unkept["why"].startswith("its map outputs are not kept")
        # Its map stage (WRITES tasks) ran again, in part or whole, as Spark runs it without sparkrecover.
        assert len(map_tasks) > sum(e["maps"] for e in registered) + WRITES
    assert len(job.marked("map")) == MAPS
    assert output(spark, job.out) == expected()
