"""Starting runs and resuming them: the core of ``submit`` and ``resume``, free of any CLI.

Both hold the run's lease for as long as they launch attempts, including automatic retries
(``--max-attempts``), which stop early when an attempt made no progress. Each folds the run's
journal once, under the lease: before its first launch, then only what each attempt it launched
added (``planning/reading.catch_up``). The ``Outcome`` it returns carries that state, for the
command line to show without reading the run again.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkrecover.core.fold import runstate
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.errors import EXIT_INTERRUPTED, LeaseLostError, SparkRecoverError, UsageError
from sparkrecover.journal import runinfo
from sparkrecover.journal.segments import next_attempt
from sparkrecover.launch import attempts
from sparkrecover.launch.options import RunOptions
from sparkrecover.planning import reading
from sparkrecover.planning.next_attempt import ResumePlan, finished, plan_resume, read_run, sweep_unjournaled
from sparkrecover.rundir import keep, results, runs, storage
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir.runs import Run

Notify = Callable[[str], None]
ShowPlan = Callable[[ResumePlan], None]
# Exits that mean a person or a scheduler stopped the run: never retried.
_STOPPED = {EXIT_INTERRUPTED, 128 + signal.SIGTERM, 128 + signal.SIGINT}


@dataclass
class Outcome:
    """What one ``submit`` or ``resume`` did: the command line renders it."""

    run: Run
    first_attempt: int  # the first attempt the command launched (or would have: nothing to do)
    state: RunState | None  # the run as its journal says after the command; None: see `unreadable`
    exit_code: int
    complete: bool = False  # the run had already succeeded: nothing was launched
    unreadable: str | None = None  # why the journal could not be read back after the attempts


@dataclass
class ResumeOptions:
    extra_options: tuple[str, ...] = ()
    spark_submit: str | None = None
    verify_level: str = "size"
    rerun: tuple[str, ...] = ()
    from_scratch: bool = False
    replay: bool = True  # --no-replay: recorded action results are not offered (all run again)
    max_attempts: int = 1
    app_args_now: list[str] | None = None
    # --json: the application's stdout goes to stderr, so that stdout holds one JSON document.
    stdout_to_stderr: bool = False
    command: str = runinfo.BY_RESUME  # the command that launches the attempts (attempt.started)

    @classmethod
    def of(cls, given: RunOptions, **own: Any) -> ResumeOptions:
        """The options of one resume (or of submit's later attempts): the command's shared ones,
        and ``own``, what only a resume has."""
        return cls(
            spark_submit=given.spark_submit,
            max_attempts=given.max_attempts,
            stdout_to_stderr=given.json_output,
            **own,
        )


def submit(
    root: str,
    run_id: str | None,
    submit_args: list[str],
    given: RunOptions,
    *,
    notify: Notify,
    warn: Notify | None = None,
    show_plan: ShowPlan = lambda plan: None,
) -> Outcome:
    """Start a run, or carry on with an existing one of that id.

    An existing run that succeeded is not launched again (so one cron line is safe to repeat);
    an unfinished one is resumed with this command line's spark-submit options merged over the
    recorded ones.
    """
    parsed = given.application(submit_args, root)
    run_id = run_id if run_id is not None else runs.new_run_id(parsed.app)
    run = Run.under(root, run_id)  # checks the id
    # Resumes and retries relaunch this very command line: its secrets are in memory, never in the journal.
    options = ResumeOptions.of(
        given, extra_options=tuple(parsed.options), app_args_now=parsed.app_args, command=runinfo.BY_SUBMIT
    )
    if run.has_journal():
        return resume(run, options, notify=notify, warn=warn, show_plan=show_plan)
    spec = given.launch_spec(parsed)
    storage.make_folder(run.dir)  # a root that cannot be made fails here, before anything is launched
    checkpoints = given.checkpoint_root
    notify(f"run {run.id}: journal in {run.dir}" + (f", checkpoints in {checkpoints}" if checkpoints else ""))
    with _lease(run, notify) as lease:
        code = attempts.run_attempt(
            run,
            1,
            spec,
            first=True,
            started_by=runinfo.BY_SUBMIT,
            notify=notify,
            warn=warn,
            lease_token=lease.token,
            stdout_to_stderr=given.json_output,
        )
        return _retry(lease, None, 1, code, options, notify, show_plan, warn)


def dry_run(
    run: Run,
    options: ResumeOptions,
    *,
    warn: Notify | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[ResumePlan, bool]:
    """What ``resume`` would do now, and whether the run is complete (nothing would be launched).
    Nothing is written: a damaged journal's segments are not set aside."""
    state = read_run(run, from_scratch=options.from_scratch, warn=warn)
    plan = plan_resume(
        state,
        run,
        next_attempt(run.dir),
        verify_level=options.verify_level,
        rerun=options.rerun,
        from_scratch=options.from_scratch,
        replay=options.replay,
        warn=warn,
        progress=progress,
    )
    return plan, finished(state, options.rerun, options.from_scratch)


def resume(
    run: Run,
    options: ResumeOptions,
    *,
    notify: Notify,
    warn: Notify | None = None,
    show_plan: ShowPlan = lambda plan: None,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Plan and launch the next attempt under the run's lease (the run read after taking it, so
    no other process can have moved it on in between), then retry as ``max_attempts`` allows.
    Given by ``submit`` (of a run that exists), it says so, and has nothing to rerun."""
    resuming = options.command == runinfo.BY_SUBMIT
    with _lease(run, notify) as lease:
        state = read_run(run, from_scratch=options.from_scratch, warn=notify, set_aside=True)
        first = next_attempt(run.dir)
        if finished(state, options.rerun, options.from_scratch):
            hint = "" if resuming else " (use --rerun STAGE or --from-scratch to run stages again)"
            notify(f"run {run.id} already completed successfully; nothing to {'do' if resuming else 'resume'}{hint}")
            return Outcome(run, first, state, 0, complete=True)
        if resuming:
            notify(f"run {run.id} exists and did not finish ({state.status()}): resuming it")
        plan = plan_resume(
            state,
            run,
            first,
            verify_level=options.verify_level,
            rerun=options.rerun,
            from_scratch=options.from_scratch,
            replay=options.replay,
            warn=notify,
            progress=progress,
        )
        show_plan(plan)
        if options.from_scratch and keep.remove(run.dir):
            notify("removed the kept shuffle map outputs (--from-scratch)")
        if options.from_scratch and results.remove(run.dir):
            notify("removed the recorded action results (--from-scratch)")
        code = _launch(plan, options, lease, notify, warn)
        return _retry(lease, state, first, code, options, notify, show_plan, warn)


def _launch(
    plan: ResumePlan, options: ResumeOptions, lease: leases.Lease, notify: Notify, warn: Notify | None = None
) -> int:
    if not plan.state.run:
        raise UsageError(f"run {plan.run.id} has no run.started record: it cannot be relaunched")
    spec = attempts.LaunchSpec.from_run_started(
        plan.state.run, list(options.extra_options), options.spark_submit, options.app_args_now
    )
    sweep_unjournaled(plan.state, plan.run.dir, notify)
    return attempts.run_attempt(
        plan.run,
        plan.attempt,
        spec,
        plan=plan.document(),
        started_by=options.command,
        notify=notify,
        warn=warn,
        lease_token=lease.token,
        stdout_to_stderr=options.stdout_to_stderr,
    )


def _still_held(lease: leases.Lease, code: int) -> None:
    """After an attempt: a lease taken over while it ran ends this process (exit 75), with no
    retry and no release; the run is the other process's now."""
    if lease.still_held():
        return
    raise LeaseLostError(
        f"run {lease.run.id}: this process lost the run's lease while the attempt ran (exit "
        f"{code}): another submit or resume judged it dead (a pause, a network "
        "partition) and took the run over; its driver committed nothing after that. "
        f"See `sparkrecover inspect {lease.run.id}`"
    )


def _retry(
    lease: leases.Lease,
    state: RunState | None,
    first: int,
    code: int,
    options: ResumeOptions,
    notify: Notify,
    show_plan: ShowPlan,
    warn: Notify | None = None,
) -> Outcome:
    """After the attempt ``first`` ended with ``code``: the run's state (None: nothing folded before
    it) caught up with it, and
    after a driver failure a resume again until success, ``max_attempts`` attempts, or an attempt
    that made no progress (retrying a deterministic failure wastes the cluster)."""
    run = lease.run
    launched, made = first, 1
    while True:
        _still_held(lease, code)
        try:
            state = reading.catch_up(state, run, launched, warn)
        except SparkRecoverError as problem:  # the attempt ran; only its journal cannot be read back
            return Outcome(run, first, None, code, unreadable=str(problem))
        if code == 0 or code in _STOPPED or made >= options.max_attempts:
            return Outcome(run, first, state, code)
        stuck = no_progress(state)
        if stuck:
            notify(f"not retrying: {stuck}")
            return Outcome(run, first, state, code)
        notify(
            f"attempt {max(state.attempts)} failed (exit {code}); resuming automatically "
            f"({made + 1} of {options.max_attempts})"
        )
        launched = next_attempt(run.dir)
        plan = plan_resume(state, run, launched, verify_level=options.verify_level, warn=notify)
        show_plan(plan)
        code = _launch(plan, options, lease, notify, warn)
        made += 1


def _normalized(error: str | None) -> str:
    # Task ids, stage numbers, addresses and times differ between two runs of the same failure.
    return re.sub(r"0x[0-9a-f]+|\d+", "#", (error or "").strip().splitlines()[0] if error else "")


def _failure(attempt: runstate.AttemptState) -> tuple[str | None, str, str] | None:
    """(stage or None, the error as compared, as shown) of a failed attempt whose driver said why:
    the last stage failure, else what ``driver.ended`` recorded (an exception outside any stage,
    or the script's own exit code). None for a driver that left no word (killed, lost journal)."""
    ended = attempt.driver_ended or {}
    code = ended.get("exit_code")
    if attempt.failures:
        stage, error = attempt.failures[-1]
        return stage, f"{_normalized(error)} (exit {code})", (error or "").splitlines()[0][:200] if error else ""
    if not code:
        return None
    said: str | None = ended.get("error")
    shown = f"{said.splitlines()[0][:200]}, exit code {code}" if said else f"exit code {code}"
    return None, f"{_normalized(said)} (exit {code})", shown


def no_progress(state: RunState) -> str | None:
    """Why the last attempt made no progress over the one before, or None if it did: it committed
    nothing and failed as the one before did, inside a stage or not."""
    numbers = sorted(state.attempts)
    if len(numbers) < 2:
        return None
    last, before = state.attempts[numbers[-1]], state.attempts[numbers[-2]]
    failed, failed_before = _failure(last), _failure(before)
    if last.committed or failed is None or failed_before is None or failed[:2] != failed_before[:2]:
        return None
    stage, _, shown = failed
    if stage is not None:
        return f"attempt {last.number} made no progress: stage {stage} failed again with the same error ({shown})"
    return f"attempt {last.number} made no progress: it ended again with {shown}"


class _lease:
    """The run's lease as a context manager that says when it took over a stale one."""

    def __init__(self, run: Run, notify: Notify):
        self.lease, self.notify = leases.Lease(run), notify

    def __enter__(self) -> leases.Lease:
        self.lease.acquire()
        if self.lease.took_over:
            self.notify(f"took over the stale lease of {leases.describe(self.lease.took_over)}")
        return self.lease

    def __exit__(self, *_: Any) -> None:
        self.lease.release()
