"""The state machine that folds a journal into what happened: the run, its attempts, its stages.

``resume``, ``inspect`` and ``replay`` all read a run through ``RunState.from_events`` so they can
never disagree about what the journal says.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core.fold import kept_partitions
from sparkrecover.core.fold.executor_losses import LossFold
from sparkrecover.core.fold.kept_partitions import Computed, WriteProgress
from sparkrecover.core.fold.kept_shuffles import ShuffleState, Unsupported, on_committed, on_registered
from sparkrecover.core.fold.savings import SavingsFold
from sparkrecover.journal import events as ev
from sparkrecover.kinds import StageStatus

# Stage statuses as the journal leaves them (the planner turns them into decisions).
STARTED, COMMITTED, FAILED = StageStatus.STARTED, StageStatus.COMMITTED, StageStatus.FAILED


@dataclass
class StageState:
    name: str
    order: int
    kind: str = "stage"
    status: StageStatus = STARTED
    attempt: int = 0  # attempt of the latest started/committed/failed event
    started: dict[str, Any] | None = None  # latest stage.started
    committed: dict[str, Any] | None = None  # latest stage.committed (may predate `started`)
    failed: dict[str, Any] | None = None  # latest stage.failed
    skipped: dict[str, Any] | None = None  # latest stage.skipped
    invalidated: dict[str, Any] | None = None
    upstream: list[str] = field(default_factory=list)
    records_lost: dict[str, Any] | None = None  # the journal.degraded that lost some of its records
    outputs: list[str] = field(default_factory=list)
    last_event: str = ""  # the latest stage.* event ("started", ..., "invalidated")
    spark_jobs: int = 0
    # The latest attempt that ran Spark jobs for it: a write's map stage runs before its
    # stage.started, so an attempt stopped there is known to have been in the stage only by this.
    spark_attempt: int = 0
    spark_stages: int = 0
    failed_spark_stages: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    # Rows Spark reports written, per attempt: a stage that ran twice must not count its rows twice.
    output_records: dict[int, int] = field(default_factory=dict)
    # Task-level progress of its write over the attempts (core/fold/kept_partitions.py, docs/design.md §4a).
    write_progress: WriteProgress | None = None
    # A committed write that kept partitions of earlier attempts: what came from where (inspect).
    kept_write: dict[str, Any] | None = None

    @property
    def write(self) -> dict[str, Any] | None:
        """The latest write.started of the unfinished write (None once the stage committed)."""
        progress = self.write_progress
        return None if progress is None or progress.ended else progress.started

    @property
    def committed_tasks(self) -> dict[int, Computed]:
        """Each partition of the unfinished write whose task committed -> (attempt, rows), over
        every attempt whose write had the same partitions."""
        return self.write_progress.unfinished if self.write_progress is not None else {}

    @property
    def partitions(self) -> dict[str, int] | None:
        """Progress inside an unfinished write: partitions whose task committed, of how many."""
        progress = self.write_progress
        if progress is None or progress.ended or self.status == COMMITTED:
            return None
        return {"committed": len(progress.computed), "total": progress.total}

    @property
    def committed_attempt(self) -> int | None:
        return self.committed["attempt"] if self.committed else None

    @property
    def bytes_written(self) -> int | None:
        if not self.committed:
            return None
        return sum(int(out.get("bytes") or 0) for out in self.committed.get("manifest") or [])

    @property
    def duration_s(self) -> float | None:
        return self.committed.get("duration_s") if self.committed else None

    @property
    def rows(self) -> int | None:
        """Rows of the committed output: as recorded at commit, else as Spark's metrics counted."""
        if not self.committed:
            return None
        if self.committed.get("rows") is not None:
            return int(self.committed["rows"])
        computed = self.output_records.get(self.committed["attempt"])
        kept = (self.kept_write or {}).get("kept_rows")
        # Spark counts only the partitions the committing attempt computed; the target also holds
        # the kept ones, whose rows their own attempts counted.
        return computed + kept if computed is not None and kept is not None else computed


@dataclass
class AttemptState:
    number: int
    started_ts: str | None = None
    ended_ts: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    driver: dict[str, Any] | None = None
    driver_ended: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    last_ts: str | None = None
    committed: list[str] = field(default_factory=list)  # stages committed in this attempt
    failures: list[tuple[str, str]] = field(default_factory=list)  # (stage, error) in this attempt
    # Who started it (attempt.started): "submit", "resume", or "launcher" for a driver that YARN,
    # an operator or an orchestrator ran again by itself (None: journals from before this was said).
    started_by: str | None = None
    # A later attempt the cluster restarted this one's driver as, while its command still waited
    # (attempt.ended of a submit whose spark-submit outlived its first driver).
    continued_by: int | None = None

    @property
    def ended(self) -> bool:
        return self.exit_code is not None or self.continued_by is not None

    @property
    def outcome(self) -> str:
        if self.exit_code is None:
            if self.driver_ended is not None:  # the CLI died after its driver finished
                code = self.driver_ended.get("exit_code")
                if code == 0:
                    return "succeeded"
                # Stopped by a signal the driver caught (driver/process/signals.py).
                return "interrupted" if self.driver_ended.get("signal") is not None else "failed"
            return "crashed"
        if self.exit_code == 0:
            return "succeeded"
        if self.signal in (signals.SIGINT, signals.SIGTERM) or self.exit_code == 130:
            return "interrupted"
        if self.signal is not None:
            # Killed (SIGKILL, the OOM killer, a segfault): the same event as a driver that died
            # with its CLI, which left no exit code; one name for both (docs/cli-output.md).
            return "crashed"
        return "failed"


@dataclass
class RunState:
    run_id: str
    run: dict[str, Any] = field(default_factory=dict)
    attempts: dict[int, AttemptState] = field(default_factory=dict)
    stages: dict[str, StageState] = field(default_factory=dict)  # in pipeline order
    degraded: list[dict[str, Any]] = field(default_factory=list)
    other_events: int = 0
    event_count: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    last_error: str | None = None
    # The latest schema.inferred per read key (core/verdicts/schema_reuse.py decides which a resume may reuse).
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The latest action.recorded per action key (core/verdicts/action_reuse.py decides which results a
    # resume may replay), and every action.replayed, in journal order.
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    replayed: list[dict[str, Any]] = field(default_factory=list)
    # Shuffles by identity, with their kept map outputs (core/fold/kept_shuffles.py), and why map outputs
    # could not be kept.
    shuffles: dict[str, ShuffleState] = field(default_factory=dict)
    shuffles_unsupported: list[Unsupported] = field(default_factory=list)
    # Executors lost and what each cost: map tasks run again, map outputs served from copies.
    lost_executors: LossFold = field(default_factory=LossFold)
    # What each resume reused of earlier attempts' stages and writes, and when (core/fold/savings.py).
    saved: SavingsFold = field(default_factory=SavingsFold)

    @classmethod
    def from_events(cls, run_id: str, records: Iterable[dict[str, Any]]) -> RunState:
        state = cls(run_id)
        state.apply_all(records)
        return state

    # -- folding --------------------------------------------------------------------------------

    def apply_all(self, records: Iterable[dict[str, Any]]) -> None:
        """``apply`` for each record, in one loop: a journal can hold a million events, mostly
        Spark telemetry, and ``resume`` folds them all before it plans. The two telemetry events
        that only add to a stage's counters are tallied here and added at the end; the result is
        the same as ``apply``'s."""
        handlers, ignore = _HANDLERS, _ignore
        job_started, stage_completed = ev.SPARK_JOB_STARTED, ev.SPARK_STAGE_COMPLETED
        stages = self.stages
        # stage -> [spark jobs, spark stages, tasks, failed tasks, failed spark stages, latest attempt with a job]
        tallies: dict[str, list[int]] = {}
        rows: dict[tuple[str, int], int] = {}  # (stage, attempt) -> rows Spark reports written
        number: Any = _NO_ATTEMPT
        attempt: AttemptState | None = None
        first, last = self.first_ts, self.last_ts
        previous = last  # the timestamp of the record before the current one
        count = other = 0
        try:
            for record in records:
                kind, last = record["type"], record["ts"]
                first = first or last
                if record["attempt"] != number:
                    if attempt is not None:
                        attempt.last_ts = previous
                    number = record["attempt"]
                    attempt = self._attempt(number)
                previous = last
                count += 1
                if kind == job_started or kind == stage_completed:
                    if "spark_shuffle" in record and kind == stage_completed:
                        self.lost_executors.on_map_stage(record)
                    name = record.get("stage")
                    if name is None:
                        continue
                    tally = tallies.get(name)
                    if tally is None:
                        if name not in stages:
                            self._stage(name)  # first seen here: its place in pipeline order
                        tally = tallies[name] = [0, 0, 0, 0, 0, 0]
                    if kind == job_started:
                        tally[0] += 1
                        tally[5] = number
                    else:
                        tally[1] += 1
                        tally[2] += int(record.get("tasks") or 0)
                        tally[3] += int(record.get("failed_tasks") or 0)
                        if record.get("failure"):
                            tally[4] += 1
                        written = (record.get("metrics") or {}).get("output_records")
                        if written:
                            key = (name, number)
                            rows[key] = rows.get(key, 0) + int(written)
                    continue
                handler = handlers.get(kind)
                if handler is None:
                    other += 1
                elif handler is not ignore:
                    assert attempt is not None  # set by the record's first line above
                    handler(self, record, attempt)
        finally:
            if attempt is not None:
                attempt.last_ts = last
            self.first_ts, self.last_ts = first, last
            self.event_count += count
            self.other_events += other
            for name, (jobs, spark_stages, tasks, failed, failed_stages, latest) in tallies.items():
                stage = stages[name]
                stage.spark_jobs += jobs
                stage.spark_attempt = max(stage.spark_attempt, latest)
                stage.spark_stages += spark_stages
                stage.tasks += tasks
                stage.failed_tasks += failed
                stage.failed_spark_stages += failed_stages
            for (name, number), written in rows.items():
                output = stages[name].output_records
                output[number] = output.get(number, 0) + written

    def apply(self, record: dict[str, Any]) -> None:
        self.event_count += 1
        kind, ts = record["type"], record["ts"]
        self.first_ts = self.first_ts or ts
        self.last_ts = ts
        attempt = self._attempt(record["attempt"])
        attempt.last_ts = ts
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.other_events += 1  # unknown or newer event types are kept and shown, never fatal
            return
        handler(self, record, attempt)

    def _attempt(self, number: int) -> AttemptState:
        if number not in self.attempts:
            self.attempts[number] = AttemptState(number)
        return self.attempts[number]

    def _stage(self, name: str) -> StageState:
        if name not in self.stages:
            self.stages[name] = StageState(name, order=len(self.stages))
        return self.stages[name]

    # -- questions ------------------------------------------------------------------------------

    @property
    def last_attempt(self) -> AttemptState | None:
        return self.attempts[max(self.attempts)] if self.attempts else None

    def status(self, lease_live: bool = False) -> str:
        last = self.last_attempt
        if last is None:
            return "unknown"
        if last.ended:
            return last.outcome
        return "running" if lease_live else last.outcome

    @property
    def succeeded(self) -> bool:
        return self.status() == "succeeded"


def _run_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.run = record


def _attempt_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    attempt.started_ts = record["ts"]
    attempt.started_by = record.get("started_by")


def _attempt_ended(state: RunState, record: dict, attempt: AttemptState) -> None:
    attempt.ended_ts = record["ts"]
    attempt.exit_code = record.get("exit_code")
    attempt.signal = record.get("signal")
    attempt.continued_by = record.get("continued_by")


def _plan_created(state: RunState, record: dict, attempt: AttemptState) -> None:
    attempt.plan = record


def _driver_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    attempt.driver = record


def _driver_ended(state: RunState, record: dict, attempt: AttemptState) -> None:
    attempt.driver_ended = record
    if record.get("error"):
        state.last_error = record["error"]


def _stage_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    stage = state._stage(record["stage"])  # stage events always name it (events.REQUIRED)
    stage.last_event = "started"
    stage.status, stage.attempt, stage.started = STARTED, record["attempt"], record
    stage.records_lost = None
    stage.kind = record.get("kind", stage.kind)
    stage.upstream = list(record.get("upstream") or [])
    stage.outputs = list(record.get("outputs") or [])


def _stage_committed(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.saved.apply(record)
    stage = state._stage(record["stage"])  # stage events always name it (events.REQUIRED)
    stage.last_event = "committed"
    stage.status, stage.attempt, stage.committed = COMMITTED, record["attempt"], record
    # The write is whole: no partial progress left, and what it kept of earlier attempts.
    stage.kept_write = kept_partitions.stage_committed(stage.write_progress, record["attempt"])
    attempt.committed.append(stage.name)
    stage.records_lost = None
    if record.get("upstream") is not None:
        stage.upstream = list(record["upstream"])


def _write_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.saved.apply(record)
    stage = state._stage(record["stage"])
    stage.write_progress = kept_partitions.on_write_started(stage.write_progress, record)


def _task_committed(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.saved.apply(record)
    stage = state.stages.get(record["stage"])
    if stage is None:  # a task of a job the stage ran before it started (older journals): no write of it
        return
    kept_partitions.task_committed(stage.write_progress, record)


def _stage_failed(state: RunState, record: dict, attempt: AttemptState) -> None:
    stage = state._stage(record["stage"])  # stage events always name it (events.REQUIRED)
    stage.last_event = "failed"
    stage.status, stage.attempt, stage.failed = FAILED, record["attempt"], record
    attempt.failures.append((stage.name, str(record.get("error") or "")))
    state.last_error = f"{record.get('stage')}: {record.get('error')}"


def _stage_skipped(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.saved.apply(record)
    stage = state._stage(record["stage"])  # stage events always name it (events.REQUIRED)
    stage.skipped, stage.last_event = record, "skipped"


def _stage_invalidated(state: RunState, record: dict, attempt: AttemptState) -> None:
    stage = state._stage(record["stage"])  # stage events always name it (events.REQUIRED)
    stage.invalidated, stage.last_event = record, "invalidated"


def _spark_job_started(state: RunState, record: dict, attempt: AttemptState) -> None:
    name = record.get("stage")
    if name is not None:
        stage = state._stage(name)
        stage.spark_jobs += 1
        stage.spark_attempt = max(stage.spark_attempt, record["attempt"])


def _spark_stage_completed(state: RunState, record: dict, attempt: AttemptState) -> None:
    if "spark_shuffle" in record:
        state.lost_executors.on_map_stage(record)
    name = record.get("stage")
    if name is not None:
        stage = state._stage(name)
        stage.spark_stages += 1
        stage.tasks += int(record.get("tasks") or 0)
        stage.failed_tasks += int(record.get("failed_tasks") or 0)
        if record.get("failure"):
            stage.failed_spark_stages += 1
        written = (record.get("metrics") or {}).get("output_records")
        if written:
            number = record["attempt"]
            stage.output_records[number] = stage.output_records.get(number, 0) + int(written)


def _executor_lost(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.lost_executors.on_lost(record)


def _shuffle_served(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.lost_executors.on_served(record)


def _journal_degraded(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.degraded.append(record)
    # Records of these stages were dropped while storage was down, a commit among them perhaps:
    # what the journal still says about them cannot be trusted to be the last word, so they
    # count as unfinished (a lost commit reruns a stage, never the other way round).
    for name in record.get("dropped_stages") or []:
        stage = state._stage(name if isinstance(name, str) else str(name))
        assert stage is not None  # a name was given
        stage.status, stage.attempt, stage.records_lost = STARTED, record["attempt"], record


def _schema_inferred(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.schemas.pop(record["key"], None)  # re-inserted: the dict stays in order of last inference
    state.schemas[record["key"]] = record


def _action_recorded(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.actions.pop(record["key"], None)  # re-inserted: the dict stays in the order they ran
    state.actions[record["key"]] = record


def _action_replayed(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.replayed.append(record)
    state.saved.apply(record)


def _shuffle_registered(state: RunState, record: dict, attempt: AttemptState) -> None:
    on_registered(state.shuffles, record)


def _shuffle_committed(state: RunState, record: dict, attempt: AttemptState) -> None:
    on_committed(state.shuffles, record)


def _shuffle_unsupported(state: RunState, record: dict, attempt: AttemptState) -> None:
    state.shuffles_unsupported.append(
        Unsupported(record["attempt"], record["reason"], record.get("stage"), record.get("spark_shuffle"))
    )


def _ignore(state: RunState, record: dict, attempt: AttemptState) -> None:
    """A known event that changes nothing the planner or inspect needs."""


_NO_ATTEMPT = object()

_HANDLERS = {
    ev.RUN_STARTED: _run_started,
    ev.ATTEMPT_STARTED: _attempt_started,
    ev.ATTEMPT_ENDED: _attempt_ended,
    ev.PLAN_CREATED: _plan_created,
    ev.DRIVER_STARTED: _driver_started,
    ev.DRIVER_ENDED: _driver_ended,
    ev.STAGE_STARTED: _stage_started,
    ev.STAGE_COMMITTED: _stage_committed,
    ev.STAGE_FAILED: _stage_failed,
    ev.WRITE_STARTED: _write_started,
    ev.TASK_COMMITTED: _task_committed,
    ev.STAGE_SKIPPED: _stage_skipped,
    ev.STAGE_INVALIDATED: _stage_invalidated,
    ev.SPARK_JOB_STARTED: _spark_job_started,
    ev.SPARK_JOB_ENDED: _ignore,
    ev.SPARK_STAGE_COMPLETED: _spark_stage_completed,
    ev.SPARK_EXECUTOR_REMOVED: _ignore,
    ev.JOURNAL_DEGRADED: _journal_degraded,
    ev.SCHEMA_INFERRED: _schema_inferred,
    ev.SCHEMA_REUSED: _ignore,  # the schema.inferred it reused stays the latest word
    ev.ACTION_RECORDED: _action_recorded,
    ev.ACTION_REPLAYED: _action_replayed,
    ev.SHUFFLE_REGISTERED: _shuffle_registered,
    ev.SHUFFLE_COMMITTED: _shuffle_committed,
    ev.SHUFFLE_UNSUPPORTED: _shuffle_unsupported,
    ev.EXECUTOR_LOST: _executor_lost,
    ev.SHUFFLE_SERVED: _shuffle_served,
}
