"""What ``sparkrecover report`` shows, as plain data: the lanes of the timeline and their bars,
the partition grids, the time recovery saved, the next resume's plan, the environment.

Built from the journal's records and the same ``RunState`` fold and ``run_summary`` view that
``inspect`` and ``replay`` show, so the page never disagrees with them; ``cli/report.py`` only lays
it out. No I/O here: the caller reads the journal, the lease and the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkrecover.core import humanize
from sparkrecover.core.grids import GridFold
from sparkrecover.core.runstate import RunState
from sparkrecover.core.summary import plan_counts, run_summary
from sparkrecover.journal import events as ev

# Each outcome with the words the page's legend says it in.
OUTCOMES = {
    "committed": "ran and committed",
    "continued": "ran, keeping partitions an earlier attempt committed",
    "skipped": "skipped: committed earlier, output verified",
    "lost": "committed earlier, output gone, nothing needed it",
    "invalidated": "found stale (code, input or version changed)",
    "failed": "failed with an error",
    "interrupted": "cut off: the attempt ended while it ran",
    "running": "still running",
}
FAILURE_LINES = 12


@dataclass
class Bar:
    """One stage in one attempt: seconds from the attempt's start."""

    stage: str
    outcome: str
    start_s: float
    end_s: float
    kind: str = "stage"
    target: str = ""
    reason: str = ""
    kept: int | None = None
    partitions: int | None = None

    @property
    def duration_s(self) -> float:
        return round(self.end_s - self.start_s, 3)


@dataclass(frozen=True)
class Mark:
    """Something that happened to the attempt itself, at a moment of its lane."""

    kind: str  # "died", "exit", "lease", "journal", "executor"
    at_s: float
    label: str


@dataclass
class Lane:
    attempt: int
    outcome: str
    started: str | None
    duration_s: float
    gap_s: float | None  # how long after the previous attempt's last event this one started
    exit: str
    app_id: str | None
    plan: str  # what its plan decided, as a tally
    saved_s: float = 0.0
    startup_s: float | None = None  # when its Spark driver was up, from the attempt's start
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    @property
    def story(self) -> str:
        """The attempt in one sentence: what it did to which stages, and how it ended."""
        said: dict[str, list[str]] = {}
        for bar in self.bars:
            text = bar.stage + (f" ({bar.kept}/{bar.partitions} partitions kept)" if bar.kept else "")
            said.setdefault(bar.outcome, []).append(text)
        verbs = {
            "skipped": "skipped",
            "lost": "found the output gone of",
            "invalidated": "found stale",
            "continued": "continued",
            "committed": "committed",
            "failed": "failed in",
            "interrupted": "was cut off in",
            "running": "is running",
        }
        parts = [f"{verbs[outcome]} {', '.join(said[outcome])}" for outcome in verbs if outcome in said]
        ending = {
            "succeeded": "and succeeded",
            "running": "and is still running",
            "crashed": f"and its driver died {humanize.duration(self.duration_s)} in, with no exit recorded",
        }.get(self.outcome, f"and ended ({self.exit})")
        did = "; ".join(parts) if parts else "reached no stage"
        return f"Attempt {self.attempt} {did}, {ending}."


@dataclass(frozen=True)
class Saving:
    attempt: int
    stage: str
    seconds: float
    how: str  # "skipped" or "kept N partitions"


@dataclass
class Report:
    run_id: str
    run_dir: str
    app: str | None
    status: str
    started: str | None
    last_activity: str | None
    wall_s: float | None
    busy_s: float
    lanes: list[Lane]
    scale_s: float  # the longest lane: every lane is drawn on this one scale
    savings: list[Saving]
    grids: list[Any]  # core.grids.Grid
    stages: list[dict[str, Any]]  # the rows inspect shows
    plan: list[dict[str, Any]] | None
    plan_note: str
    failure: list[str]
    failure_where: str | None
    environment: list[tuple[str, str]]
    damage: list[str]
    events: int

    @property
    def saved_s(self) -> float:
        return round(sum(saving.seconds for saving in self.savings), 3)

    @property
    def last_attempt_s(self) -> float | None:
        return self.lanes[-1].duration_s if self.lanes else None

    @property
    def from_zero_s(self) -> float | None:
        """The last attempt's own time plus what it did not have to do again: about what a run
        from zero would have taken."""
        if not self.lanes or len(self.lanes) < 2:
            return None
        return round(self.lanes[-1].duration_s + self.lanes[-1].saved_s, 3)


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _target(record: dict[str, Any]) -> str:
    target = record.get("target") or ", ".join(str(o) for o in record.get("outputs") or [])
    return str(target)


class _Timing:
    """The bars and marks of each attempt, and what each resume saved, from the records in order."""

    def __init__(self) -> None:
        self.origin: dict[int, float] = {}  # attempt -> its first event (seconds)
        self.last: dict[int, float] = {}
        self.bars: dict[int, list[Bar]] = {}
        self.open: dict[tuple[int, str], Bar] = {}
        self.marks: dict[int, list[Mark]] = {}
        self.startup: dict[int, float] = {}
        self.durations: dict[str, float] = {}  # stage -> duration recorded at its latest commit
        self.savings: list[Saving] = []
        self.write_start: dict[tuple[int, str], float] = {}
        self.task_done: dict[tuple[int, str], dict[int, float]] = {}  # partition -> when it committed

    def apply(self, record: dict[str, Any]) -> None:
        attempt, at = record["attempt"], _seconds(record["ts"])
        origin = self.origin.setdefault(attempt, at)
        self.last[attempt] = max(self.last.get(attempt, at), at)
        offset = round(max(at - origin, 0.0), 3)
        kind, name = record["type"], str(record.get("stage"))
        if kind == ev.STAGE_STARTED:
            bar = Bar(name, "running", offset, offset, str(record.get("kind") or "stage"), _target(record))
            self.bars.setdefault(attempt, []).append(bar)
            self.open[(attempt, name)] = bar
        elif kind in (ev.STAGE_COMMITTED, ev.STAGE_FAILED):
            key = (attempt, name)
            bar = self.open.pop(key) if key in self.open else self._instant(attempt, record, offset)
            bar.end_s = offset
            if kind == ev.STAGE_FAILED:
                bar.outcome, bar.reason = "failed", humanize.first_line(record.get("error"))
            else:
                bar.outcome = "continued" if bar.kept else "committed"
                if isinstance(record.get("duration_s"), (int, float)):
                    self.durations[name] = float(record["duration_s"])
        elif kind in (ev.STAGE_SKIPPED, ev.STAGE_INVALIDATED):
            self._skipped_or_stale(attempt, record, offset)
        elif kind == ev.WRITE_STARTED:
            self._write_started(attempt, record, at)
        elif kind == ev.TASK_COMMITTED and isinstance(record.get("partition"), int):
            self.task_done.setdefault((attempt, name), {})[record["partition"]] = at
        elif kind == ev.DRIVER_STARTED:
            self.startup.setdefault(attempt, offset)
        elif kind == ev.LEASE_LOST:
            self._mark(attempt, "lease", offset, "lease lost: another process took the run over")
        elif kind == ev.JOURNAL_DEGRADED:
            self._mark(
                attempt, "journal", offset, "journal storage failing: " + humanize.first_line(record.get("error"))
            )
        elif kind == ev.SPARK_EXECUTOR_REMOVED:
            self._mark(attempt, "executor", offset, f"executor {record.get('executor')} removed")

    def _instant(self, attempt: int, record: dict[str, Any], offset: float) -> Bar:
        bar = Bar(record["stage"], "committed", offset, offset, str(record.get("kind") or "stage"), _target(record))
        self.bars.setdefault(attempt, []).append(bar)
        return bar

    def _skipped_or_stale(self, attempt: int, record: dict[str, Any], offset: float) -> None:
        reason = humanize.first_line(record.get("reason"))
        bar = self._instant(attempt, record, offset)
        if record["type"] == ev.STAGE_INVALIDATED:
            bar.outcome, bar.reason = "invalidated", reason
            return
        lost = reason.startswith("output lost")
        bar.outcome, bar.reason = ("lost" if lost else "skipped"), reason
        recorded = self.durations.get(record["stage"])
        if not lost and recorded is not None:
            self.savings.append(Saving(attempt, record["stage"], round(recorded, 3), "skipped"))

    def _write_started(self, attempt: int, record: dict[str, Any], at: float) -> None:
        name = record["stage"]
        self.write_start[(attempt, name)] = at
        kept = {p for p in record.get("kept") or [] if isinstance(p, int)}
        bar = self.open.get((attempt, name))
        if bar is not None and kept:
            bar.kept, bar.partitions = len(kept), int(record.get("partitions") or 0)
            bar.reason = f"{len(kept)}/{bar.partitions} partitions kept from earlier attempts"
        # What keeping them saved: the time each earlier attempt's write took to commit them.
        for earlier in range(1, attempt):
            done = self.task_done.get((earlier, name), {})
            began = self.write_start.get((earlier, name))
            reused = [when for partition, when in done.items() if partition in kept]
            if began is not None and reused:
                how = f"kept {len(reused)} partitions"
                self.savings.append(Saving(attempt, name, round(max(reused) - began, 3), how))

    def _mark(self, attempt: int, kind: str, offset: float, label: str) -> None:
        self.marks.setdefault(attempt, []).append(Mark(kind, offset, label))

    def close(self, attempt: int, running: bool) -> None:
        """Bars still open when the attempt's events stop were cut off by its end (or still run)."""
        end = round(self.last.get(attempt, 0.0) - self.origin.get(attempt, 0.0), 3)
        for (number, name), bar in list(self.open.items()):
            if number == attempt:
                bar.end_s = end
                bar.outcome = "running" if running else "interrupted"
                del self.open[(number, name)]


def _exit_text(row: dict[str, Any]) -> str:
    if row["outcome"] == "running":
        return "running"
    if row["exit_code"] is None:
        return "driver died: no exit recorded (killed, or its host went away)"
    text = f"exit {row['exit_code']}"
    return text + (f", killed by {row['signal_name']}" if row.get("signal_name") else "")


def build(
    state: RunState,
    records: Sequence[dict[str, Any]],
    run_dir: str,
    *,
    lease_live: bool = False,
    plan: dict[str, Any] | None = None,
    plan_problem: str | None = None,
    damage: Sequence[str] = (),
) -> Report:
    """The report of a run: ``state`` folded from ``records`` (the journal in the reader's order),
    whether the lease says it runs now, and the plan ``resume --dry-run`` would print (None when
    there is none to show; ``plan_problem`` says why planning failed)."""
    run_id = state.run_id
    details = run_summary(state, run_dir, lease_live=lease_live)
    timing, grids = _Timing(), GridFold()
    for record in records:
        timing.apply(record)
        grids.apply(record)
    lanes, previous_end = [], None
    for row in details["attempts"]:
        number = row["attempt"]
        timing.close(number, running=row["outcome"] == "running")
        origin = timing.origin.get(number)
        lane = Lane(
            number,
            row["outcome"],
            row["started"] or (state.first_ts if number == min(state.attempts) else None),
            round(timing.last.get(number, 0.0) - (origin or 0.0), 3),
            None if previous_end is None or origin is None else round(max(origin - previous_end, 0.0), 3),
            _exit_text(row),
            row["app_id"],
            humanize.tally(row["plan"]) if row["plan"] else "",
            round(sum(s.seconds for s in timing.savings if s.attempt == number), 3),
            timing.startup.get(number),
            timing.bars.get(number, []),
            list(timing.marks.get(number, [])),
        )
        if row["outcome"] == "crashed":
            lane.marks.append(Mark("died", lane.duration_s, "the driver died here: nothing more was journaled"))
        elif row["outcome"] in ("failed", "interrupted"):
            lane.marks.append(Mark("exit", lane.duration_s, f"attempt ended: {lane.exit}"))
        lanes.append(lane)
        previous_end = timing.last.get(number)
    return Report(
        run_id=run_id,
        run_dir=run_dir,
        app=details["app"],
        status=details["status"],
        started=details["started"],
        last_activity=details["last_activity"],
        wall_s=details["duration_s"],
        busy_s=details["busy_s"],
        lanes=lanes,
        scale_s=max([lane.duration_s for lane in lanes] + [0.001]),
        savings=timing.savings,
        grids=grids.grids(),
        stages=details["stages"],
        plan=None if plan is None else list(plan.get("stages") or []),
        plan_note=plan_problem or _plan_note(details["status"], plan),
        failure=_failure(state),
        failure_where=_failure_where(state),
        environment=_environment(state, run_dir),
        damage=list(damage),
        events=state.event_count,
    )


def wants_plan(status: str) -> bool:
    """Whether a next resume has anything to decide: not for a finished or a live run."""
    return status not in ("succeeded", "running")


def _plan_note(status: str, plan: dict[str, Any] | None) -> str:
    if status == "succeeded":
        return "The run succeeded: resume would launch nothing."
    if status == "running":
        return "The run is running now: resume is refused while its lease is live."
    if plan is None:
        return "No plan: the journal is damaged, and only resume --from-scratch can run it again."
    counts = humanize.tally(plan_counts(plan)) or "no stages"
    return f"What 'sparkrecover resume {plan.get('run')}' would do now, as attempt {plan.get('attempt')}: {counts}."


def _failure(state: RunState) -> list[str]:
    if not state.last_error:
        return []
    lines = [line.rstrip() for line in str(state.last_error).strip().splitlines()]
    return lines[:FAILURE_LINES] + (
        [f"… ({len(lines) - FAILURE_LINES} more lines)"] if len(lines) > FAILURE_LINES else []
    )


def _failure_where(state: RunState) -> str | None:
    """Where ``state.last_error`` came from: the fold keeps the latest of a stage's error and the
    driver's (the application's exception, which a driver reports after its stage's)."""
    for attempt in sorted(state.attempts.values(), key=lambda a: -a.number):
        if attempt.driver_ended and attempt.driver_ended.get("error"):
            return f"attempt {attempt.number}, as its driver reported it"
        if attempt.failures:
            return f"attempt {attempt.number}, stage {attempt.failures[-1][0]}"
    return None


def _environment(state: RunState, run_dir: str) -> list[tuple[str, str]]:
    run = state.run
    last = state.last_attempt
    driver = (last.driver if last else None) or {}
    versions = run.get("versions") or {}
    found = [
        ("Spark version", driver.get("spark_version")),
        ("Master", driver.get("master")),
        ("Deploy mode", driver.get("deploy_mode")),
        ("Application id", driver.get("app_id")),
        ("Listener", driver.get("listener")),
        ("Journal", run_dir),
        ("Application", " ".join([str(run.get("app") or "")] + [str(a) for a in run.get("app_args") or []]).strip()),
        ("spark-submit", run.get("spark_submit")),
        ("spark-submit options", " ".join(str(a) for a in run.get("spark_submit_args") or [])),
        ("Checkpoints", run.get("checkpoint_root")),
        ("User and host", "@".join(str(v) for v in (run.get("user"), run.get("host")) if v)),
        ("Working folder", run.get("cwd")),
        ("sparkrecover", versions.get("sparkrecover")),
        ("Python", versions.get("python")),
        ("Journal events", f"{state.event_count:,}"),
    ]
    return [(label, str(value)) for label, value in found if value]
