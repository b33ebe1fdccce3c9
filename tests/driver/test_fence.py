"""Fencing: a driver whose lease was taken over writes and commits nothing."""

from __future__ import annotations

import os
import threading
import time

import orjson
import pytest

import sparkrecover as sr
from sparkrecover.driver.process import fence
from sparkrecover.errors import EXIT_LEASE_LOST
from sparkrecover.jvm import (
    COMMIT_PROTOCOL_CONF,
    DEFAULT_COMMIT_PROTOCOL,
    FENCED_PROTOCOL_CLASS,
    RESUMING_PROTOCOL_CLASS,
)
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import lease_lock
from sparkrecover.rundir.runs import Run
from tests.helpers import install_runtime, journal, numbers


def hold(run_dir, token):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(
            orjson.dumps(
                {
                    "run": "run1",
                    "host": "h",
                    "pid": 1,
                    "user": "u",
                    "token": token,
                    "ttl_s": 30.0,
                    "heartbeat": "x",
                    "heartbeat_epoch": 0,
                }
            )
        )


def test_a_driver_under_its_lease_commits(spark, tmp_path):
    rt = install_runtime(tmp_path)
    rt.lease_token = "mine"
    hold(rt.run_dir, "mine")
    sr.checkpoint("nums", numbers(spark))
    assert [e["type"] for e in journal(rt) if e["type"].startswith("stage.")] == ["stage.started", "stage.committed"]


@pytest.mark.parametrize("taken", ["theirs", None])
def test_a_driver_that_lost_its_lease_writes_nothing_and_exits_75(spark, tmp_path, taken, capsys):
    rt = install_runtime(tmp_path)
    rt.lease_token = "mine"
    if taken:
        hold(rt.run_dir, taken)
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as stopped:
        sr.checkpoint("nums", numbers(spark), path=out)
    assert stopped.value.code == EXIT_LEASE_LOST
    assert not os.path.exists(out)
    records = journal(rt)
    assert [e["type"] for e in records] == ["lease.lost"]
    assert records[0]["token"] == "mine" and records[0]["holder"] == taken
    assert "lost the run's lease" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # and stays fenced, without reading the lease again
        sr.checkpoint("again", numbers(spark), path=out)


def test_the_commit_checks_the_lease_after_the_write(spark, tmp_path):
    """Taken over while the stage's write ran: the commit is refused."""
    rt = install_runtime(tmp_path)
    rt.lease_token = "mine"
    hold(rt.run_dir, "mine")

    @sr.stage(outputs=[str(tmp_path / "out")])
    def write():
        numbers(spark).write.parquet(str(tmp_path / "out"))
        hold(rt.run_dir, "theirs")

    with pytest.raises(SystemExit):
        write()
    assert [e["type"] for e in journal(rt)] == ["stage.started", "lease.lost"]


def test_a_driver_without_a_token_is_not_fenced(spark, tmp_path):
    rt = install_runtime(tmp_path)
    hold(rt.run_dir, "theirs")
    sr.checkpoint("nums", numbers(spark))
    assert leases.read_lease(rt.run_dir)["token"] == "theirs"


# The job commit's own check (FencedCommitProtocol, in the package's jar): a driver frozen inside a
# write and continued after a takeover gets no further than its Spark job's commit.


def _lease_file(run_dir, content):
    path = os.path.join(run_dir, "lease.json")
    if content is None:
        os.remove(path)
    elif isinstance(content, bytes):
        with open(path, "wb") as handle:
            handle.write(content)
    else:
        hold(run_dir, content)


def _data_files(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith("part-")) if os.path.isdir(folder) else []


@pytest.fixture
def fenced(spark, jvm):
    """The JVM's FencedCommitProtocol, disarmed and the session's protocol unset afterwards."""
    protocol = jvm.sparkrecover.jvm.commit.FencedCommitProtocol
    yield protocol
    protocol.disarm()
    spark.conf.unset(COMMIT_PROTOCOL_CONF)
    spark.sparkContext._jsc.sc().conf().remove(COMMIT_PROTOCOL_CONF)


@pytest.mark.parametrize("protocol_class", [FENCED_PROTOCOL_CLASS, RESUMING_PROTOCOL_CLASS])
def test_a_job_commit_under_a_lease_taken_over_is_refused_and_leaves_the_target_as_it_was(
    spark, fenced, tmp_path, protocol_class
):
    """Both the session-wide protocol and task-level resume's (which extends it) refuse a job commit
    when the lease holds another token, none, or is damaged; Spark aborts the job, so the target
    keeps exactly its files. Under the driver's own token the write commits."""
    run_dir, out = str(tmp_path / "run"), str(tmp_path / "out")
    hold(run_dir, "mine")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    assert fenced.arm(os.path.join(run_dir, "lease.json"), "mine", hadoop) is None
    spark.conf.set(COMMIT_PROTOCOL_CONF, protocol_class)
    numbers(spark).write.json(out)
    before = {name: os.stat(os.path.join(out, name)).st_mtime_ns for name in os.listdir(out)}
    for taken in ("theirs", b'{"token": "mi', None):
        _lease_file(run_dir, taken)
        with pytest.raises(Exception) as refused:
            numbers(spark).write.mode("append").json(out)
        assert "job commit refused: this driver lost the run's lease" in str(refused.value)
        assert {name: os.stat(os.path.join(out, name)).st_mtime_ns for name in os.listdir(out)} == before
    hold(run_dir, "mine")
    numbers(spark).write.mode("append").json(out)
    assert len(_data_files(out)) == 2 * len([n for n in before if n.startswith("part-")])


def _waiting_for(path, timeout_s=300.0):
    """Whether another process waits for a POSIX lock on ``path`` (Linux's /proc/locks lists a
    blocked request as ``->``), polled until one does or ``timeout_s`` passes."""
    inode = f":{os.stat(path).st_ino} "
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open("/proc/locks") as handle:
            if any("->" in line and inode in line for line in handle):
                return True
        time.sleep(0.05)
    return False


def test_a_job_commit_waits_for_a_takeover_under_way_and_then_refuses(spark, fenced, tmp_path):
    """On a local run directory the job commit reads the lease under the lock a takeover holds
    (rundir/lease_lock.py): a lease that changes hands while the job runs its tasks is seen by
    the commit, whatever the timing, and the target keeps what it held."""
    run_dir, out = str(tmp_path / "run"), str(tmp_path / "out")
    hold(run_dir, "mine")
    assert (
        fenced.arm(os.path.join(run_dir, "lease.json"), "mine", spark.sparkContext._jsc.hadoopConfiguration()) is None
    )
    spark.conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)
    failures: list[BaseException] = []

    def write():
        try:
            numbers(spark).write.json(out)
        except BaseException as error:  # the refusal, seen in the test's thread below
            failures.append(error)

    with lease_lock.held(Run("run1", run_dir)):  # a takeover under way
        writing = threading.Thread(target=write)
        writing.start()
        assert _waiting_for(os.path.join(run_dir, lease_lock.LOCK_FILE)), "the job commit did not wait for the lock"
        hold(run_dir, "theirs")  # the takeover lands while the commit waits
    writing.join()
    assert failures and "job commit refused: this driver lost the run's lease" in str(failures[0])
    assert _data_files(out) == []


def test_a_lease_the_jvm_cannot_read_does_not_fence_the_job_commit(spark, fenced, tmp_path):
    """Cannot tell is not lost (as in driver/process/fence.py): no FileSystem for the lease's scheme."""
    reason = fenced.arm("nosuchfs://bucket/run/lease.json", "mine", spark.sparkContext._jsc.hadoopConfiguration())
    assert reason and "cannot be read from the JVM" in reason
    spark.conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)
    numbers(spark).write.json(str(tmp_path / "out"))
    assert _data_files(str(tmp_path / "out"))


def test_a_driver_whose_job_commit_was_refused_exits_75_with_lease_lost(spark, fenced, tmp_path, capsys):
    """The stage's write fails in Python with the JVM's refusal: the driver ends fenced (exit 75,
    lease.lost journaled, no stage.failed), and nothing of the write reached its target."""
    rt = install_runtime(tmp_path)
    rt.lease_token = "mine"
    hold(rt.run_dir, "mine")
    assert fence.arm(rt, spark.sparkContext) is None
    assert spark.sparkContext.getConf().get(COMMIT_PROTOCOL_CONF) == FENCED_PROTOCOL_CLASS
    spark.conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)  # this session predates arm
    out = str(tmp_path / "out")

    @sr.stage(outputs=[out])
    def write():
        hold(rt.run_dir, "theirs")  # taken over after the stage's checks, while its write runs
        numbers(spark).write.json(out)

    with pytest.raises(SystemExit) as stopped:
        write()
    assert stopped.value.code == EXIT_LEASE_LOST
    assert _data_files(out) == []
    records = journal(rt)
    assert [e["type"] for e in records] == ["stage.started", "lease.lost"]
    assert records[1]["doing"] == "the job commit" and records[1]["holder"] == "theirs"
    assert "stopping before the job commit" in capsys.readouterr().err


def test_an_application_with_its_own_commit_protocol_keeps_it(spark, fenced, tmp_path):
    rt = install_runtime(tmp_path)
    rt.lease_token = "mine"
    spark.sparkContext._jsc.sc().conf().set(COMMIT_PROTOCOL_CONF, DEFAULT_COMMIT_PROTOCOL)
    reason = fence.arm(rt, spark.sparkContext)
    assert reason and "its own commit protocol" in reason
    assert not fenced.armed()
    assert spark.sparkContext.getConf().get(COMMIT_PROTOCOL_CONF) == DEFAULT_COMMIT_PROTOCOL


# A later attempt of the run fences too: under submit --deploy-mode cluster YARN's next application
# attempt runs under the same token as the one before it, so the token alone cannot tell them apart.


def _later_attempt_starts(run_dir, attempt=2):
    from sparkrecover.journal import events as ev
    from sparkrecover.journal import segments

    assert segments.claim(run_dir, attempt, ev.WRITER_DRIVER)


def test_a_driver_whose_run_has_a_later_attempt_writes_nothing_and_exits_75(spark, tmp_path, capsys):
    rt = install_runtime(tmp_path)
    rt.lease_token = "shared"
    hold(rt.run_dir, "shared")
    sr.checkpoint("first", numbers(spark))
    _later_attempt_starts(rt.run_dir)
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as stopped:
        sr.checkpoint("second", numbers(spark), path=out)
    assert stopped.value.code == EXIT_LEASE_LOST
    assert not os.path.exists(out)
    lost = journal(rt, "lease.lost")
    assert [(e["holder"], e["later_attempt"]) for e in lost] == [("shared", 2)]
    assert "attempt 2 of this run has started" in capsys.readouterr().err


@pytest.mark.parametrize("protocol_class", [FENCED_PROTOCOL_CLASS, RESUMING_PROTOCOL_CLASS])
def test_a_job_commit_after_a_later_attempt_started_is_refused(spark, fenced, tmp_path, protocol_class):
    """The same token still in the lease, but attempt 2's segment exists: attempt 1's job commit is
    refused and the target keeps its files; the journal folder missing or holding only attempt 1
    does not fence."""
    rt = install_runtime(tmp_path)
    rt.lease_token = "shared"
    hold(rt.run_dir, "shared")
    assert fence.arm(rt, spark.sparkContext) is None
    spark.conf.set(COMMIT_PROTOCOL_CONF, protocol_class)
    out = str(tmp_path / "out")
    numbers(spark).write.json(out)  # no journal folder yet: armed, not fenced
    rt.writer.emit("stage.skipped", stage="x", reason="-")
    rt.writer.flush()
    numbers(spark).write.mode("append").json(out)  # attempt 1's own segment only
    before = sorted(os.listdir(out))
    _later_attempt_starts(rt.run_dir)
    with pytest.raises(Exception) as refused:
        numbers(spark).write.mode("append").json(out)
    assert "job commit refused" in str(refused.value) and "attempt 2 of the run has started" in str(refused.value)
    assert sorted(os.listdir(out)) == before
