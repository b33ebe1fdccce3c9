"""Which attempt of its run a driver is: decided from the journal, never from its command line
alone (docs/design.md §4b, docs/launchers.md).

A driver starts in one of four ways, and ``begin`` tells them apart:

(a) ``submit`` or ``resume`` launched it: they hold the run's lease, journaled the attempt
    (``--attempt N``) and pass the lease's token. The driver claims attempt N's driver segment
    and runs the plan they wrote (``--plan``).
(b) that command line run again after the command is gone (YARN's next application attempt, an
    operator, an orchestrator's retry, a person): its token is not the live lease's.
(c) ``spark-submit $(sparkrecover spark-submit-args ...)``: no command, no token, no attempt.
(d) YARN's next application attempt under ``submit --deploy-mode cluster``: the command still waits
    for the application and renews its lease, and the driver gets the same command line (the live
    lease's token, attempt N) while attempt N's driver segment exists already.

(b), (c) and (d) are restarts. A restart of a run that succeeded runs nothing (``Finished``).
Otherwise it takes the lease itself in (b) and (c), waiting up to the lease's TTL for a holder
that stopped renewing it (a live holder: exit 4, nothing touched); in (d) it runs under the
command's lease. It claims the next attempt number (``journal/segments.claim``: of two drivers
one wins, the other exits 4 having written nothing), plans that attempt with the planner
``resume`` uses (``planning/``), writes ``plans/<attempt>.json``, and journals its own
``attempt.started`` (``"started_by": "launcher"``), ``plan.created`` and, at its end,
``attempt.ended``: no command does it for it. Nothing an earlier driver wrote is touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkrecover.driver.process import messages
from sparkrecover.errors import LeaseHeldError, RunNotFoundError, SparkRecoverError
from sparkrecover.journal import events as ev
from sparkrecover.journal import runinfo, segments
from sparkrecover.journal.writer import JournalWriter
from sparkrecover.planning.next_attempt import (
    finished,
    last_attempt_succeeded,
    plan_resume,
    read_run,
    sweep_unjournaled,
)
from sparkrecover.rundir import keep, plans, results, runs, storage
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir.runs import Run

Say = Callable[[str], None]


class Finished(SparkRecoverError):
    """The run succeeded already: a restart runs nothing (exit 0)."""

    exit_code = 0


@dataclass
class Start:
    """What this driver is: its attempt, the plan it runs, the lease token it is fenced on."""

    attempt: int
    plan: plans.Plan | None
    token: str | None
    lease: leases.Lease | None = None  # the lease this driver took itself: renewed, released at its end
    restart: bool = False  # started by a launcher: it journals its own attempt.started and attempt.ended
    first_of_run: bool = False  # no run.started yet: it writes that too
    reuse: str | None = None  # a restart's list of kept map outputs for the JVM, when it has one


def say(message: str) -> None:
    messages.say(f"sparkrecover: {message}")


def begin(options: Any, said: Say = say) -> Start:
    """Decide this driver's attempt from its bootstrap ``options`` (see the module's docstring).
    ``LeaseHeldError`` (exit 4): another live process runs the run, or another driver claimed the
    attempt; ``FormatError`` (exit 3): a plan this sparkrecover cannot read; ``Finished``."""
    run = Run(options.run_id, options.run_dir)
    cli_token = options.lease_token if _live_holder(run.dir, options.lease_token) else None
    if cli_token is not None and options.attempt is not None:
        # The command's plan is read first: one this driver cannot read leaves nothing claimed.
        plan = plans.read_plan(storage.read_bytes(options.plan), options.plan) if options.plan else None
        if segments.claim(run.dir, options.attempt, ev.WRITER_DRIVER):  # (a)
            return Start(options.attempt, plan, cli_token)
    if last_attempt_succeeded(run):
        raise Finished(f"run {run.id} already completed successfully: this driver runs nothing")
    lease = None if cli_token is not None else take_lease(run, said)
    try:
        return _restart(run, cli_token, lease, said)
    except BaseException:
        if lease is not None:
            lease.release()
        raise


def _restart(run: Run, cli_token: str | None, lease: leases.Lease | None, said: Say) -> Start:
    """The attempt after the last one, planned as ``resume`` plans it (run read under the lease)."""
    try:
        state = read_run(run, warn=said) if run.has_journal() else None
    except RunNotFoundError:  # only an empty segment: a first driver claimed attempt 1 and died
        state = None
    if state is not None and finished(state):
        raise Finished(f"run {run.id} already completed successfully: this driver runs nothing")
    attempt = segments.next_attempt(run.dir)
    if not segments.claim(run.dir, attempt, ev.WRITER_DRIVER):
        raise LeaseHeldError(f"run {run.id}: another driver started as attempt {attempt} at the same moment")
    token = lease.token if lease is not None else cli_token
    if state is None:
        said(f"run {run.id}: this driver starts it, as attempt {attempt}")
        return Start(attempt, None, token, lease, restart=True, first_of_run=True)
    plan = plan_resume(state, run, attempt, warn=said)
    sweep_unjournaled(state, run.dir, said)
    document = plan.document()
    storage.write_atomic(run.plan_url(attempt), plans.encode(document))
    reuse = keep.write_reuse_list(run.dir, attempt, plan.shuffles) if plan.shuffles else None
    counts: dict[str, int] = {}
    for entry in document.stages:
        counts[entry.decision] = counts.get(entry.decision, 0) + 1
    said(
        f"run {run.id}: attempt {max(state.attempts)} did not finish; "
        f"this driver resumes it as attempt {attempt} ("
        + (", ".join(f"{count} {decision}" for decision, count in counts.items()) or "no stage recorded")
        + ")"
    )
    return Start(attempt, document, token, lease, restart=True, first_of_run=not state.run, reuse=reuse)


def journal_start(start: Start, writer: JournalWriter, command: list[str], run_started: dict[str, Any]) -> None:
    """A restart's own records of its start: no command journals them for it."""
    if not start.restart:
        return
    if start.first_of_run:
        writer.emit(ev.RUN_STARTED, **run_started)
    writer.emit(ev.ATTEMPT_STARTED, **runinfo.attempt_started(command, runinfo.BY_LAUNCHER))
    if start.plan is not None:
        writer.emit(
            ev.PLAN_CREATED,
            plan=f"{runs.PLANS_DIR}/{start.attempt:04d}.json",
            stages=[entry.summary() for entry in start.plan.stages],
        )
    writer.flush()


def journal_end(start: Start, writer: JournalWriter, exit_code: int, said: Say = say) -> None:
    """After ``driver.ended``: a restart's ``attempt.ended``; and a restart that finished the run
    removes its kept shuffle map outputs, as ``submit`` does."""
    if not start.restart:
        return
    writer.emit(ev.ATTEMPT_ENDED, exit_code=exit_code, signal=exit_code - 128 if exit_code > 128 else None)
    if exit_code == 0 and keep.remove(writer.run.dir):
        said("removed the kept shuffle map outputs: the run succeeded")
    if exit_code == 0 and results.remove(writer.run.dir):
        said("removed the recorded action results: the run succeeded")


def take_lease(run: Run, said: Say) -> leases.Lease:
    """The run's lease for this driver. A holder that stopped renewing it (dead, or frozen) is
    waited for until the lease is older than its TTL, then taken over; one that renews it while
    this waits, or that took it while this looked, is alive: ``LeaseHeldError``, nothing written."""
    lease = leases.Lease(run)
    first = leases.read_lease(run.dir)
    deadline = None
    while True:
        try:
            lease.acquire()
        except LeaseHeldError:
            holder = leases.read_lease(run.dir)
            if holder is None:
                raise  # unreadable and young: acquire's message says whom to ask
            if first is None or _beat(holder) != _beat(first):
                raise LeaseHeldError(
                    f"run {run.id} is being run by {leases.describe(holder)}, which took or renewed its lease "
                    "while this driver looked"
                ) from None
            ttl = float(holder.get("ttl_s") or leases.DEFAULT_TTL)
            if deadline is None:
                wait = max(0.0, ttl - (time.time() - float(holder.get("heartbeat_epoch") or 0)))
                said(
                    f"the run's lease is held by {leases.describe(holder)}, which may be dead: waiting up to "
                    f"{wait:.0f} s for it to go stale (a holder that is alive renews it)"
                )
                deadline = time.monotonic() + wait + 1.0
            elif time.monotonic() > deadline:
                raise
            time.sleep(min(1.0, ttl / 10))
            continue
        if lease.took_over:
            said(f"took over the stale lease of {leases.describe(lease.took_over)}")
        return lease


def _beat(lease: dict[str, Any]) -> tuple[Any, Any]:
    return lease.get("token"), lease.get("heartbeat_epoch")


def _live_holder(run_dir: str, token: str | None) -> bool:
    """Whether the lease is live and holds ``token``: the command that launched this driver waits."""
    if token is None:
        return False
    held = leases.read_lease(run_dir)
    return held is not None and held.get("token") == token and leases.is_live(held)


def point_the_jvm(start: Start, script: str) -> None:
    """Before the script makes its SparkContext: what the keeping shuffle manager reads, as this
    restart needs it. The command line a launcher runs again carries the settings of the attempt
    it was recorded for: that attempt's reuse list (or none), and the digest of the script as it
    was then (an edited script must not match the map outputs its earlier version kept). A Java
    system property set now is what every SparkConf the script makes from here on starts from
    (spark-submit hands its --conf settings to the driver the same way), so the restart's own
    values replace them."""
    if not start.restart:
        return
    from pyspark import SparkContext

    from sparkrecover.core.verdicts import staleness
    from sparkrecover.jvm import SHUFFLE_MANAGER_CLASS, SHUFFLE_MANAGER_CONF, SHUFFLE_REUSE_CONF, SHUFFLE_SCRIPT_CONF

    SparkContext._ensure_initialized()
    system = SparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    if system.getProperty(SHUFFLE_MANAGER_CONF) != SHUFFLE_MANAGER_CLASS:
        return  # map outputs are not kept under this command line
    system.setProperty(SHUFFLE_SCRIPT_CONF, staleness.script_digest(script, storage.read_bytes))
    if start.reuse:
        system.setProperty(SHUFFLE_REUSE_CONF, start.reuse)
    else:
        system.clearProperty(SHUFFLE_REUSE_CONF)
