"""Which attempt a driver is, decided from the journal (driver/process/which_attempt.py): the four ways a
driver starts, a finished run, a live holder, two drivers at once. No Spark: the decision is made
before the script runs."""

from __future__ import annotations

import multiprocessing
import os
import re

import orjson
import pytest

from sparkrecover.driver.bootstrap import _parse
from sparkrecover.driver.process import which_attempt as attempts
from sparkrecover.errors import LeaseHeldError
from sparkrecover.journal import events as ev
from sparkrecover.journal import segments
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import plans
from sparkrecover.rundir.runs import Run
from tests import journals


def options(run_dir, *given):
    parsed, _ = _parse(["--run-dir", str(run_dir), "--run-id", "nightly", *given, "--", "app.py"])
    return parsed


def stale_lease(run_dir, host="elsewhere", age=3600.0, ttl=30.0, token="old"):
    import time

    now = time.time() - age
    document = {
        "v": 1,
        "run": "nightly",
        "host": host,
        "pid": 999999,
        "user": "etl",
        "token": token,
        "ttl_s": ttl,
        "heartbeat": "then",
        "heartbeat_epoch": now,
    }
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(document))


@pytest.fixture
def said():
    lines: list[str] = []
    return lines


def test_the_driver_a_command_launched_runs_the_commands_attempt_and_plan(tmp_path, said):
    run = journals.crashed_run(tmp_path / "root")
    lease = leases.Lease(Run("nightly", run.dir)).acquire()
    plan_url = os.path.join(run.dir, "plans", "0002.json")
    os.makedirs(os.path.dirname(plan_url))
    with open(plan_url, "wb") as handle:
        handle.write(plans.encode(plans.Plan("nightly", 2, [])))
    try:
        start = attempts.begin(
            options(run.dir, "--attempt", "2", "--lease-token", lease.token, "--plan", plan_url), said.append
        )
    finally:
        lease.release()
    assert (start.attempt, start.token, start.restart, start.lease) == (2, lease.token, False, None)
    assert start.plan is not None and start.plan.attempt == 2 and said == []
    assert [s.name for s in segments.list_segments(run.dir)][-1] == "0002-driver-000000.jsonl"


def test_the_recorded_command_run_again_after_its_command_died_resumes_as_the_next_attempt(tmp_path, said):
    """(b): the lease of a dead command (a pid gone on this host) is taken over at once, attempt 2
    is claimed and planned as resume plans it; the earlier attempt's files are not touched."""
    run = journals.crashed_run(tmp_path / "root")
    before = {s.name: open(s.url, "rb").read() for s in segments.list_segments(run.dir)}
    stale_lease(run.dir, host=os.uname().nodename, age=0.0)  # fresh, but its pid is gone
    start = attempts.begin(options(run.dir, "--attempt", "1", "--lease-token", "*****"), said.append)
    try:
        assert (start.attempt, start.restart, start.first_of_run) == (2, True, False)
        assert start.lease is not None and start.token == start.lease.token
        assert [(e.stage, e.decision) for e in start.plan.stages] == [
            ("orders", "skip"),
            ("clean", "skip"),
            ("daily", "run"),
        ]
        assert os.path.exists(os.path.join(run.dir, "plans", "0002.json"))
        assert {s.name: open(s.url, "rb").read() for s in segments.list_segments(run.dir) if s.attempt == 1} == before
        assert said[0].startswith("took over the stale lease of pid 999999")
        assert "attempt 1 did not finish; this driver resumes it as attempt 2 (2 skip, 1 run)" in said[1]
    finally:
        start.lease.release()


def test_a_restart_sweeps_the_kept_map_outputs_no_journal_record_names_as_resume_does(tmp_path, said):
    """A killed driver leaves map output folders it never journaled (an executor's copy, or one
    made after its last flush): never read, they would stay until the run succeeds. The restart
    removes them before its plan's reuse list is written, as ``resume`` does before it launches;
    the folder the journal names stays."""
    run = journals.SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").started("daily", ("orders",))
    entry = {
        "map": 0,
        "path": "abc/map-0-t1-aaaaaaaa",
        "data_bytes": 1,
        "index_bytes": 16,
        "records": 1,
        "row_bytes": 8,
    }
    run.driver.emit(ev.SHUFFLE_REGISTERED, shuffle="abc", spark_shuffle=0, stage="daily", maps=2, reduces=2, reused=0)
    run.driver.emit(ev.SHUFFLE_COMMITTED, shuffle="abc", spark_shuffle=0, stage="daily", maps=[entry])
    run.crash()
    kept = os.path.join(run.dir, "shuffles", "abc")
    for name in ("map-0-t1-aaaaaaaa", "map-1-t2-bbbbbbbb"):
        os.makedirs(os.path.join(kept, name))
        with open(os.path.join(kept, name, "data"), "wb") as handle:
            handle.write(b"x")
    stale_lease(run.dir, host=os.uname().nodename, age=0.0)  # its pid is gone
    start = attempts.begin(options(run.dir), said.append)
    try:
        assert (start.attempt, start.restart) == (2, True)
        assert os.listdir(kept) == ["map-0-t1-aaaaaaaa"]
        assert "removed 1 kept shuffle map output folder(s) that no journal record names" in said
    finally:
        start.lease.release()


def test_the_first_driver_of_a_new_run_takes_the_lease_and_attempt_1(tmp_path, said):
    run_dir = tmp_path / "root" / "nightly"
    start = attempts.begin(options(run_dir), said.append)
    try:
        assert (start.attempt, start.plan, start.restart, start.first_of_run) == (1, None, True, True)
        assert leases.read_lease(str(run_dir))["token"] == start.token
    finally:
        start.lease.release()
    assert not os.path.exists(run_dir / "lease.json")


def test_a_restart_of_a_finished_run_runs_nothing_and_writes_nothing(tmp_path, said):
    run = journals.clean_run(tmp_path / "root")
    before = sorted(os.listdir(run.dir)), sorted(os.listdir(os.path.join(run.dir, "journal")))
    with pytest.raises(attempts.Finished) as done:
        attempts.begin(options(run.dir, "--attempt", "1", "--lease-token", "*****"), said.append)
    assert done.value.exit_code == 0 and "already completed successfully" in str(done.value)
    assert (sorted(os.listdir(run.dir)), sorted(os.listdir(os.path.join(run.dir, "journal")))) == before


def test_yarns_next_attempt_under_the_waiting_commands_lease_is_the_next_attempt(tmp_path, said):
    """(d): the command's token is the live lease's, but its attempt's driver segment exists."""
    run = journals.crashed_run(tmp_path / "root")
    lease = leases.Lease(Run("nightly", run.dir)).acquire()
    try:
        start = attempts.begin(options(run.dir, "--attempt", "1", "--lease-token", lease.token), said.append)
        assert (start.attempt, start.token, start.lease, start.restart) == (2, lease.token, None, True)
        assert leases.read_lease(run.dir)["token"] == lease.token  # not taken over
    finally:
        lease.release()


def test_a_restart_waits_for_a_lease_that_stopped_beating_then_takes_it_and_says_so(tmp_path, said):
    run = journals.crashed_run(tmp_path / "root")
    stale_lease(run.dir, age=0.0, ttl=2.0)  # fresh, on another host: only the heartbeat can tell
    start = attempts.begin(options(run.dir), said.append)
    try:
        assert start.attempt == 2
        assert said[0].startswith("the run's lease is held by pid 999999 on elsewhere")
        assert re.search(r"waiting up to \d s for it to go stale", said[0])
        assert said[1].startswith("took over the stale lease of pid 999999 on elsewhere")
    finally:
        start.lease.release()


def test_a_live_holder_that_renews_its_lease_stops_a_restart_with_exit_4_and_nothing_written(tmp_path, said):
    run = journals.crashed_run(tmp_path / "root")
    holder = leases.Lease(Run("nightly", run.dir), ttl=0.6).acquire()  # renews every 0.2 s
    listing = sorted(os.listdir(os.path.join(run.dir, "journal")))
    try:
        with pytest.raises(LeaseHeldError) as held:
            attempts.begin(options(run.dir), said.append)
        assert held.value.exit_code == 4 and "renewed its lease" in str(held.value)
        assert leases.read_lease(run.dir)["token"] == holder.token
    finally:
        holder.release()
    assert sorted(os.listdir(os.path.join(run.dir, "journal"))) == listing
    assert not os.path.exists(os.path.join(run.dir, "plans"))


def _restart_in_a_process(run_dir, go, results, done):
    go.wait()
    try:
        start = attempts.begin(options(run_dir), lambda message: None)
    except LeaseHeldError as problem:
        results.put(("refused", str(problem)))
        return
    results.put(("started", start.attempt))
    done.wait(60)  # alive, as a driver running its script is: its lease is not a dead process's
    start.lease.release()


def test_two_restarts_at_once_one_runs_the_other_exits_4_having_written_nothing(tmp_path):
    """Two processes (two restarted drivers' bootstraps) decide at the same moment on a run whose
    lease went stale: one takes the lease and attempt 2, the other is refused and wrote nothing."""
    run = journals.crashed_run(tmp_path / "root")
    stale_lease(run.dir)
    context = multiprocessing.get_context("fork")
    go, results, done = context.Barrier(2), context.Queue(), context.Event()
    racers = [context.Process(target=_restart_in_a_process, args=(run.dir, go, results, done)) for _ in range(2)]
    for racer in racers:
        racer.start()
    outcomes = sorted(results.get(timeout=60) for _ in racers)
    done.set()
    for racer in racers:
        racer.join(timeout=30)
    assert [outcome for outcome, _ in outcomes] == ["refused", "started"], outcomes
    assert outcomes[1][1] == 2
    assert [s.attempt for s in segments.list_segments(run.dir)] == [1, 1, 2]
    assert sorted(os.listdir(os.path.join(run.dir, "plans"))) == ["0002.json"]


def test_a_claimed_attempt_is_claimed_once(tmp_path):
    run_dir = str(tmp_path / "run")
    assert segments.claim(run_dir, 3, ev.WRITER_DRIVER)
    assert not segments.claim(run_dir, 3, ev.WRITER_DRIVER)
    assert segments.latest_attempt(run_dir) == 3 and segments.next_attempt(run_dir) == 4


def test_a_claim_on_s3_is_one_conditional_put(s3):
    from sparkrecover.rundir import storage

    run_dir = storage.join(s3.prefix, "nightly")
    assert segments.claim(run_dir, 1, ev.WRITER_DRIVER)
    assert not segments.claim(run_dir, 1, ev.WRITER_DRIVER)
    assert storage.read_bytes(segments.segment_url(run_dir, 1, ev.WRITER_DRIVER, 0)) == b""
