"""Starting runs and resuming them: the core of ``submit`` and ``resume``, free of any CLI.

Both hold the run's lease for as long as they launch attempts, including automatic retries
(``--max-attempts``), which stop early when an attempt made no progress.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core import planner, runstate, schema_reuse
from sparkrecover.core.runstate import RunState
from sparkrecover.errors import EXIT_INTERRUPTED, JournalDamagedError, LeaseLostError, UsageError
from sparkrecover.journal import events as ev
from sparkrecover.journal import reader
from sparkrecover.journal.segments import list_segments, next_attempt
from sparkrecover.launch import attempts, launcher, reading, shuffles
from sparkrecover.launch.evidence import StorageEvidence
from sparkrecover.rundir import keep, runs, storage
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir.plans import KeptShuffle, Plan, PlanEntry, SchemaEntry

Notify = Callable[[str], None]
ShowPlan = Callable[["ResumePlan"], None]
# Exits that mean a person or a scheduler stopped the run: never retried.
_STOPPED = {EXIT_INTERRUPTED, 128 + signal.SIGTERM, 128 + signal.SIGINT}


@dataclass
class ResumePlan:
    run_dir: str
    run_id: str
    state: RunState
    attempt: int
    decisions: list[PlanEntry]
    # Inferred schemas the next attempt may reuse (core/schema_reuse.py), beside the stage decisions.
    schemas: list[SchemaEntry] = field(default_factory=list)
    # Kept shuffle map outputs the next attempt may reuse (planner.plan_shuffles).
    shuffles: list[KeptShuffle] = field(default_factory=list)

    def document(self) -> Plan:
        return planner.plan_of(self.run_id, self.attempt, self.decisions, self.schemas, self.shuffles)

    def dry_run(self) -> dict[str, Any]:
        return planner.dry_run_document(self.run_id, self.attempt, self.decisions, self.schemas, self.shuffles)


@dataclass
class ResumeOptions:
    extra_options: tuple[str, ...] = ()
    spark_submit: str | None = None
    verify_level: str = "size"
    rerun: tuple[str, ...] = ()
    from_scratch: bool = False
    max_attempts: int = 1
    app_args_now: list[str] | None = None
    # --json: the application's stdout goes to stderr, so that stdout holds one JSON document.
    stdout_to_stderr: bool = False


def submit(
    root: str,
    run_id: str | None,
    submit_args: list[str],
    *,
    spark_submit: str | None,
    flush_interval: float,
    buffer_size: int,
    checksums: bool = False,
    max_attempts: int = 1,
    checkpoint_root: str | None = None,
    keep_shuffles: str = shuffles.DEFAULT_MODE,
    notify: Notify,
    warn: Notify | None = None,
    show_plan: ShowPlan = lambda plan: None,
    stdout_to_stderr: bool = False,
) -> tuple[str, int]:
    """Start a run, or carry on with an existing one of that id; returns (run id, exit code).

    An existing run that succeeded is not launched again (so one cron line is safe to repeat);
    an unfinished one is resumed with this command line's spark-submit options merged over the
    recorded ones.
    """
    parsed = launcher.split_submit_args(submit_args)
    launcher.check_application(parsed)
    checkpoint_root = storage.normalize(checkpoint_root) if checkpoint_root else None
    if parsed.deploy_mode == "cluster":
        for option, where in (("--root", root), ("--checkpoint-root", checkpoint_root)):
            if where is not None and launcher_is_local_root(where):
                raise UsageError(
                    f"--deploy-mode cluster needs {option} on shared storage (s3://, hdfs://, "
                    f"...): the driver runs on the cluster and cannot write to {where}"
                )
    run_id = runs.check_run_id(run_id) if run_id is not None else runs.new_run_id(parsed.app)
    run_dir = runs.run_dir_of(root, run_id)
    if runs.has_journal(run_dir):
        state = reading.load_state(run_dir, run_id, notify)
        if state.succeeded:
            notify(f"run {run_id} already completed successfully; nothing to do")
            return run_id, 0
        notify(f"run {run_id} exists and did not finish ({state.status()}): resuming it")
        options = ResumeOptions(
            extra_options=tuple(parsed.options),
            spark_submit=spark_submit,
            max_attempts=max_attempts,
            app_args_now=parsed.app_args,
            stdout_to_stderr=stdout_to_stderr,
        )
        return run_id, resume(run_dir, run_id, options, notify=notify, warn=warn, show_plan=show_plan)
    spec = attempts.LaunchSpec(
        spark_submit=launcher.find_spark_submit(spark_submit),
        submit_args=parsed,
        flush_interval=flush_interval,
        buffer_size=buffer_size,
        checksums=checksums,
        checkpoint_root=checkpoint_root,
        keep_shuffles=keep_shuffles,
    )
    storage.make_folder(run_dir)  # a root that cannot be made fails here, before anything is launched
    notify(f"run {run_id}: journal in {run_dir}" + (f", checkpoints in {checkpoint_root}" if checkpoint_root else ""))
    with _lease(run_dir, run_id, notify) as lease:
        code = attempts.run_attempt(
            run_dir,
            run_id,
            1,
            spec,
            first=True,
            notify=notify,
            warn=warn,
            lease_token=lease.token,
            stdout_to_stderr=stdout_to_stderr,
        )
        # Retries relaunch this very command line: its secrets are in memory, never in the journal.
        retry = ResumeOptions(
            extra_options=tuple(parsed.options),
            spark_submit=spark_submit,
            max_attempts=max_attempts,
            app_args_now=parsed.app_args,
            stdout_to_stderr=stdout_to_stderr,
        )
        return run_id, _retry(lease, code, 1, retry, notify, show_plan, warn)


def launcher_is_local_root(root: str) -> bool:
    """A root the driver of a cluster could not reach: this machine's disk, or this process's
    memory (``memory://`` lives and dies with one Python process)."""
    return storage.is_local(root) or storage.scheme_of(root) == "memory"


def plan_resume(
    run_dir: str,
    run_id: str,
    *,
    verify_level: str = "size",
    rerun: tuple[str, ...] = (),
    from_scratch: bool = False,
    warn: Notify | None = None,
    progress: Callable[[int], None] | None = None,
    set_aside: bool = False,
) -> ResumePlan:
    """The next attempt's plan. A damaged journal can only be planned ``from_scratch``: its
    damaged segments are left out (moved to ``journal.damaged/`` when ``set_aside``, i.e. when
    the attempt is launched, not on a dry run) and every stage runs."""
    attempt = next_attempt(run_dir)
    try:
        state = reading.load_state(run_dir, run_id, warn)
    except JournalDamagedError:
        if not from_scratch:
            raise
        state = _without_damage(run_dir, run_id, warn or (lambda message: None), set_aside)
    evidence = StorageEvidence(run_dir, verify_level, progress)
    verified = "output verified"
    if verify_level == "checksum" and not state.run.get("checksums"):
        # Without digests the checksum level checks what footer does: say so, not "verified".
        verified = "output verified by size and footer (no checksums were recorded)"
        if warn:
            warn(
                f"--verify checksum: run {run_id} was recorded without checksums (submit --checksums records "
                "them); outputs were checked by file sizes, _SUCCESS and Parquet/ORC footers instead"
            )
    decisions = planner.make_plan(state, evidence, rerun=rerun, from_scratch=from_scratch, verified=verified)
    reusable = schema_reuse.reusable(state, evidence.stat, from_scratch=from_scratch)
    kept = planner.plan_shuffles(state, decisions, keep.size_reader(run_dir), from_scratch=from_scratch)
    return ResumePlan(run_dir, run_id, state, attempt, decisions, reusable, kept)


DAMAGED_DIR = "journal.damaged"


def _without_damage(run_dir: str, run_id: str, notify: Notify, set_aside: bool) -> RunState:
    """The run folded from its sound segments, the damaged ones set aside (docs/decisions.md).

    The fold cannot know what the damaged segments held (stages committed, outputs written), so
    this is for ``--from-scratch`` only, where every stage runs whatever the journal said. The
    run's ``run.started`` (how to relaunch it) is salvaged from a damaged segment if it was there.
    """
    damaged = reader.damaged_segments(run_dir)
    sound = [s for s in list_segments(run_dir) if s not in damaged]
    salvaged = [
        record
        for segment in damaged
        if segment.attempt == min(s.attempt for s in [*sound, *damaged])
        for record in reader.salvage_records(segment)
        if record["type"] == ev.RUN_STARTED
    ][:1]
    records = list(reader.iter_segments(sound))
    if salvaged and not any(record["type"] == ev.RUN_STARTED for record in records[:1]):
        records.insert(0, salvaged[0])
    names = ", ".join(segment.name for segment in damaged)
    if set_aside:
        for segment in damaged:
            _move(segment.url, storage.join(run_dir, DAMAGED_DIR, segment.name))
        notify(
            f"the journal was damaged: set {len(damaged)} segment(s) aside in "
            f"{storage.join(run_dir, DAMAGED_DIR)} for inspection ({names}); every stage runs again"
        )
    else:
        notify(f"the journal is damaged ({names}): --from-scratch sets those segments aside and runs every stage again")
    return RunState.from_events(run_id, records)


def _move(url: str, to: str) -> None:
    target, number = to, 1
    while storage.exists(target):  # damaged twice: keep both
        number += 1
        target = f"{to}.{number}"
    storage.write_atomic(target, storage.read_bytes(url))
    fs, path = storage.filesystem(url)
    with storage.guard(url, "set a damaged journal segment aside"):
        fs.rm(path)


def resume(
    run_dir: str,
    run_id: str,
    options: ResumeOptions,
    *,
    notify: Notify,
    warn: Notify | None = None,
    show_plan: ShowPlan = lambda plan: None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Plan and launch the next attempt under the run's lease (planned after taking it, so no
    other process can have moved the run on in between), then retry as ``max_attempts`` allows."""
    with _lease(run_dir, run_id, notify) as lease:
        plan = plan_resume(
            run_dir,
            run_id,
            verify_level=options.verify_level,
            rerun=options.rerun,
            from_scratch=options.from_scratch,
            warn=notify,
            progress=progress,
            set_aside=True,
        )
        show_plan(plan)
        if options.from_scratch and keep.remove(run_dir):
            notify("removed the kept shuffle map outputs (--from-scratch)")
        code = _launch(plan, options, lease, notify, warn)
        return _retry(lease, code, 1, options, notify, show_plan, warn)


def _launch(
    plan: ResumePlan, options: ResumeOptions, lease: leases.Lease, notify: Notify, warn: Notify | None = None
) -> int:
    if not plan.state.run:
        raise UsageError(f"run {plan.run_id} has no run.started record: it cannot be relaunched")
    spec = attempts.LaunchSpec.from_run_started(
        plan.state.run, list(options.extra_options), options.spark_submit, options.app_args_now
    )
    # Map outputs no record names (an executor lost mid-copy, a driver killed before it journaled
    # them) are never read: removed, so the keep folder holds what the journal names.
    named = [str(entry["path"]) for shuffle in plan.state.shuffles.values() for entry in shuffle.kept.values()]
    swept = keep.sweep(plan.run_dir, named)
    if swept:
        notify(f"removed {len(swept)} kept shuffle map output folder(s) that no journal record names")
    return attempts.run_attempt(
        plan.run_dir,
        plan.run_id,
        plan.attempt,
        spec,
        plan=plan.document(),
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
        f"run {lease.run_id}: this process lost the run's lease while the attempt ran (exit "
        f"{code}): another submit or resume judged it dead (a pause, a network "
        "partition) and took the run over; its driver committed nothing after that. "
        f"See `sparkrecover inspect {lease.run_id}`"
    )


def _retry(
    lease: leases.Lease,
    code: int,
    made: int,
    options: ResumeOptions,
    notify: Notify,
    show_plan: ShowPlan,
    warn: Notify | None = None,
) -> int:
    """After a driver failure, resume again until success, ``max_attempts`` attempts, or an
    attempt that made no progress (retrying a deterministic failure wastes the cluster)."""
    run_dir, run_id = lease.run_dir, lease.run_id
    _still_held(lease, code)
    while code != 0 and code not in _STOPPED and made < options.max_attempts:
        state = reading.load_state(run_dir, run_id)
        stuck = no_progress(state)
        if stuck:
            notify(f"not retrying: {stuck}")
            break
        notify(
            f"attempt {max(state.attempts)} failed (exit {code}); resuming automatically "
            f"({made + 1} of {options.max_attempts})"
        )
        plan = plan_resume(run_dir, run_id, verify_level=options.verify_level, warn=notify)
        show_plan(plan)
        code = _launch(plan, options, lease, notify, warn)
        _still_held(lease, code)
        made += 1
    return code


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

    def __init__(self, run_dir: str, run_id: str, notify: Notify):
        self.lease, self.notify = leases.Lease(run_dir, run_id), notify

    def __enter__(self) -> leases.Lease:
        self.lease.acquire()
        if self.lease.took_over:
            self.notify(f"took over the stale lease of {leases.describe(self.lease.took_over)}")
        return self.lease

    def __exit__(self, *_: Any) -> None:
        self.lease.release()
