"""The run's lease: acquired, released, taken over when stale, refused while live (docs/design.md §8)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import orjson
import pytest

from sparkrecover.errors import LeaseHeldError, UsageError
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run

# -- the lease ------------------------------------------------------------------------------------


def write_lease(run_dir, **fields):
    os.makedirs(run_dir, exist_ok=True)
    document = {
        "run": "r1",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "user": "someone",
        "token": "theirs",
        "ttl_s": 30.0,
        "heartbeat": "2026-01-01T00:00:00.000Z",
        "heartbeat_epoch": time.time(),
        **fields,
    }
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(document))
    return document


def test_lease_acquire_and_release(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    try:
        held = leases.read_lease(run_dir)
        assert (held["host"], held["pid"], held["run"]) == (socket.gethostname(), os.getpid(), "r1")
        assert abs(held["heartbeat_epoch"] - time.time()) < 3600
        assert held["heartbeat"].endswith("Z") and lease.took_over is None
        assert leases.is_live(held)
        with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}") as caught:
            leases.Lease(Run("r1", run_dir)).acquire()
        assert caught.value.exit_code == 4
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
    leases.Lease(Run("r1", run_dir)).acquire().release()  # free again


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("stale", [{"pid": "dead"}, {"heartbeat_epoch": time.time() - 3600}])
def test_a_stale_lease_is_taken_over(tmp_path, stale):
    run_dir = str(tmp_path / "r1")
    if stale.get("pid") == "dead":
        stale = {"pid": dead_pid()}
    old = write_lease(run_dir, **stale)
    assert not leases.is_live(old)
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    try:
        assert lease.took_over == old
        assert leases.read_lease(run_dir)["token"] == lease.token
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))


def test_a_stale_lease_does_not_change_hands_while_a_job_commit_holds_its_lock(tmp_path, monkeypatch):
    """The lock FencedCommitProtocol holds from its check of the lease to the end of its job
    commit (another process: a POSIX lock): a takeover waits for it, and gives up with exit 4
    rather than fall between a driver's check and its commit."""
    run_dir = str(tmp_path / "r1")
    old = write_lease(run_dir, heartbeat_epoch=time.time() - 3600)
    monkeypatch.setattr(leases.lease_lock, "COMMIT_WAIT_S", 0.3)
    committing = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            os.path.join(run_dir, "lease.lock"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert committing.stdout is not None and committing.stdout.readline() == "held\n"
        with pytest.raises(LeaseHeldError, match="is committing a write or renewing its lease") as refused:
            leases.Lease(Run("r1", run_dir)).acquire()
        assert refused.value.exit_code == 4
        assert leases.read_lease(run_dir) == old  # untouched
    finally:
        committing.communicate("")
    lease = leases.Lease(Run("r1", run_dir)).acquire()  # the commit ended: the lock died with it
    try:
        assert lease.took_over == old
    finally:
        lease.release()


def test_a_fresh_lease_of_another_host_is_live(tmp_path):
    run_dir = str(tmp_path / "r1")
    write_lease(run_dir, host="some-other-host", pid=1)
    with pytest.raises(LeaseHeldError, match="some-other-host"):
        leases.Lease(Run("r1", run_dir)).acquire()


def test_release_leaves_a_lease_taken_over_by_someone_else(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    theirs = write_lease(run_dir, token="someone-else")
    lease.release()
    assert leases.read_lease(run_dir) == theirs


def test_a_lease_on_s3_refuses_a_second_holder_until_released(s3):
    from sparkrecover.errors import LeaseHeldError
    from sparkrecover.rundir.lease import Lease

    run_dir = s3.prefix + "/held"
    first = Lease(Run("held", run_dir)).acquire()
    try:
        with pytest.raises(LeaseHeldError):
            Lease(Run("held", run_dir)).acquire()
    finally:
        first.release()
    assert not storage.exists(run_dir + "/lease.json")
    Lease(Run("held", run_dir)).acquire().release()


# -- an unreadable lease, atomic creation, conditional writes on S3 -------------


@pytest.mark.parametrize("content", [b"", b'{"run": "r1", "host": "h'])
def test_an_unreadable_lease_is_reported_not_a_recursion(tmp_path, content):
    run_dir = str(tmp_path / "r1")
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(content)
    with pytest.raises(LeaseHeldError) as caught:
        leases.Lease(Run("r1", run_dir)).acquire()
    message = str(caught.value)
    assert caught.value.exit_code == 4
    assert "unreadable" in message and os.path.join(run_dir, "lease.json") in message
    assert "remove" in message and "ask" in message  # how to clear it, and who to ask


def test_an_unreadable_lease_older_than_the_ttl_is_taken_over(tmp_path):
    run_dir = str(tmp_path / "r1")
    os.makedirs(run_dir)
    path = os.path.join(run_dir, "lease.json")
    with open(path, "wb") as handle:
        handle.write(b"")
    old = time.time() - 2 * leases.DEFAULT_TTL
    os.utime(path, (old, old))
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    try:
        assert leases.read_lease(run_dir)["token"] == lease.token
        assert lease.took_over is not None and "unreadable" in leases.describe(lease.took_over)
    finally:
        lease.release()


def test_a_fresh_lease_is_never_seen_empty(tmp_path, monkeypatch):
    """Created with its content in one step: a reader between 'create' and 'write' saw an empty
    file before (and a concurrent acquire recursed on it)."""
    run_dir = str(tmp_path / "r1")
    seen = []
    real_open = os.open

    def spying_open(path, flags, *args):
        fd = real_open(path, flags, *args)
        if str(path).endswith("lease.json"):
            seen.append(os.path.getsize(path))
        return fd

    monkeypatch.setattr(os, "open", spying_open)
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    monkeypatch.setattr(os, "open", real_open)
    try:
        assert all(size > 0 for size in seen)
        assert leases.read_lease(run_dir)["token"] == lease.token
    finally:
        lease.release()


def test_the_ttl_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKRECOVER_LEASE_TTL", "3")
    lease = leases.Lease(Run("r1", str(tmp_path / "r1"))).acquire()
    try:
        assert leases.read_lease(lease.run.dir)["ttl_s"] == 3.0
    finally:
        lease.release()
    monkeypatch.setenv("SPARKRECOVER_LEASE_TTL", "soon")
    with pytest.raises(UsageError, match=r"\$SPARKRECOVER_LEASE_TTL must be a number of seconds above 0, not 'soon'"):
        leases.Lease(Run("r2", str(tmp_path / "r2")))


def test_a_lost_heartbeat_is_noticed_and_not_overwritten(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKRECOVER_LEASE_TTL", "0.3")
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(Run("r1", run_dir)).acquire()
    theirs = write_lease(run_dir, token="someone-else")
    assert lease.lost.wait(5)
    time.sleep(0.3)
    assert leases.read_lease(run_dir) == theirs
    lease.release()
    assert leases.read_lease(run_dir) == theirs


def test_s3_creates_the_lease_only_if_absent_and_beats_by_compare_and_swap(s3, monkeypatch):
    """Against the moto server: two creators cannot both win (If-None-Match: *), and a heartbeat
    whose ETag is no longer the stored one does not overwrite the new holder (If-Match)."""
    monkeypatch.setenv("SPARKRECOVER_LEASE_TTL", "0.6")
    run_dir = s3.prefix + "/cas"
    url = run_dir + "/lease.json"
    first = leases.Lease(Run("cas", run_dir))
    assert first._create() is True
    second = leases.Lease(Run("cas", run_dir))
    assert second._create() is False  # the store refused: the object exists
    assert leases.read_lease(run_dir)["token"] == first.token
    assert first._heartbeat() is True
    storage.write_atomic(
        url,
        orjson.dumps(
            {
                "run": "cas",
                "token": "intruder",
                "host": "elsewhere",
                "pid": 1,
                "heartbeat_epoch": time.time(),
                "ttl_s": 30.0,
            }
        ),
    )
    assert first._heartbeat() is False  # the ETag changed: compare-and-swap fails, nothing written
    assert leases.read_lease(run_dir)["token"] == "intruder"


def test_s3_takeover_is_a_compare_and_swap_on_the_stale_lease(s3):
    run_dir = s3.prefix + "/stale"
    url = run_dir + "/lease.json"
    storage.write_atomic(
        url,
        orjson.dumps(
            {
                "run": "stale",
                "token": "old",
                "host": "elsewhere",
                "pid": 1,
                "heartbeat_epoch": time.time() - 3600,
                "ttl_s": 30.0,
            }
        ),
    )
    found = leases.look(url)
    storage.write_atomic(
        url,
        orjson.dumps(
            {
                "run": "stale",
                "token": "quicker",
                "host": "elsewhere",
                "pid": 1,
                "heartbeat_epoch": time.time(),
                "ttl_s": 30.0,
            }
        ),
    )
    loser = leases.Lease(Run("stale", run_dir))
    assert loser._replace(found) is False  # judged stale a moment ago, but replaced since
    assert leases.read_lease(run_dir)["token"] == "quicker"


def test_s3_an_empty_lease_is_reported_then_taken_over(s3, monkeypatch):
    run_dir = s3.prefix + "/empty"
    storage.write_atomic(run_dir + "/lease.json", b"")
    with pytest.raises(LeaseHeldError, match="unreadable"):
        leases.Lease(Run("empty", run_dir)).acquire()
    monkeypatch.setattr(leases, "_now", lambda: time.time() + 2 * leases.DEFAULT_TTL)
    lease = leases.Lease(Run("empty", run_dir)).acquire()
    try:
        assert leases.read_lease(run_dir)["token"] == lease.token
    finally:
        lease.release()


def test_resume_over_an_empty_lease_exits_4_with_advice(run, cli, tmp_path):
    run.cli.flush()
    open(os.path.join(run.dir, "lease.json"), "wb").close()
    code, _, err = cli("resume", run.run_id, "--root", str(tmp_path / "root"))
    assert code == 4, err
    assert "unreadable" in err and "Traceback" not in err and "RecursionError" not in err


def _lock_is_free(run_dir: str) -> bool:
    """Whether another process can take the lease's lock now (POSIX locks exclude processes only)."""
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "try:\n"
        "    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError:\n"
        "    sys.exit(1)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, os.path.join(run_dir, "lease.lock")], check=False)
    return done.returncode == 0


@pytest.mark.parametrize("step", ["heartbeat", "release"])
def test_a_heartbeat_and_a_release_change_the_lease_only_under_its_lock(tmp_path, monkeypatch, step):
    """A driver frozen between its heartbeat's check of the lease and its write (SIGSTOP, a paused
    VM) must not, once thawed, write its own lease over the one a takeover wrote (nor re-create
    one a finished resume released): the job commit would then pass its fence. The check and the
    write (or removal) happen under the lock a takeover takes, so the takeover sees one or the
    other whole."""
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(Run("r1", run_dir), ttl=3600).acquire()
    seen: list[bool] = []
    real_read = leases.read_lease

    def read_then_look_at_the_lock(folder):
        found = real_read(folder)
        seen.append(_lock_is_free(run_dir))
        return found

    monkeypatch.setattr(leases, "read_lease", read_then_look_at_the_lock)
    if step == "heartbeat":
        assert lease._heartbeat()
        monkeypatch.setattr(leases, "read_lease", real_read)
        lease.release()
    else:
        lease.release()
    assert seen and not any(seen)
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
