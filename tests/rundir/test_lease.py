"""The run's lease: acquired, released, taken over when stale, refused while live (DESIGN §8)."""
from __future__ import annotations

import os
import socket
import subprocess
import time

import orjson
import pytest

from sparkrecover.errors import LeaseHeldError
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import storage

# -- the lease ------------------------------------------------------------------------------------

def write_lease(run_dir, **fields):
    os.makedirs(run_dir, exist_ok=True)
    document = {"run": "r1", "host": socket.gethostname(), "pid": os.getpid(), "user": "someone",
                "token": "theirs", "ttl_s": 30.0, "heartbeat": "2026-01-01T00:00:00.000Z",
                "heartbeat_epoch": time.time(), **fields}
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(document))
    return document


def test_lease_acquire_and_release(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(run_dir, "r1").acquire()
    try:
        held = leases.read_lease(run_dir)
        assert (held["host"], held["pid"], held["run"]) == (socket.gethostname(), os.getpid(), "r1")
        assert abs(held["heartbeat_epoch"] - time.time()) < 3600
        assert held["heartbeat"].endswith("Z") and lease.took_over is None
        assert leases.is_live(held)
        with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}") as caught:
            leases.Lease(run_dir, "r1").acquire()
        assert caught.value.exit_code == 4
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
    leases.Lease(run_dir, "r1").acquire().release()  # free again


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
    lease = leases.Lease(run_dir, "r1").acquire()
    try:
        assert lease.took_over == old
        assert leases.read_lease(run_dir)["token"] == lease.token
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))


def test_a_fresh_lease_of_another_host_is_live(tmp_path):
    run_dir = str(tmp_path / "r1")
    write_lease(run_dir, host="some-other-host", pid=1)
    with pytest.raises(LeaseHeldError, match="some-other-host"):
        leases.Lease(run_dir, "r1").acquire()


def test_release_leaves_a_lease_taken_over_by_someone_else(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(run_dir, "r1").acquire()
    theirs = write_lease(run_dir, token="someone-else")
    lease.release()
    assert leases.read_lease(run_dir) == theirs


def test_a_lease_on_s3_refuses_a_second_holder_until_released(s3):
    from sparkrecover.errors import LeaseHeldError
    from sparkrecover.rundir.lease import Lease

    run_dir = s3.prefix + "/held"
    first = Lease(run_dir, "held").acquire()
    try:
        with pytest.raises(LeaseHeldError):
            Lease(run_dir, "held").acquire()
    finally:
        first.release()
    assert not storage.exists(run_dir + "/lease.json")
    Lease(run_dir, "held").acquire().release()
