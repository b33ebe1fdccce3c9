"""Fencing (issue 15, item 8): a driver whose lease was taken over writes and commits nothing."""
from __future__ import annotations

import os

import orjson
import pytest

import sparkrecover as sr
from sparkrecover.errors import EXIT_LEASE_LOST
from sparkrecover.rundir import lease as leases
from tests.helpers import install_runtime, journal, numbers


def hold(run_dir, token):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps({"run": "run1", "host": "h", "pid": 1, "user": "u", "token": token,
                                   "ttl_s": 30.0, "heartbeat": "x", "heartbeat_epoch": 0}))


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
