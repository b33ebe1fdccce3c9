"""What ``sparkrecover report`` shows, as plain data: the lanes of the timeline and their bars,
the partition grids, the time recovery saved, the next resume's plan, the environment.

Built in one pass over the journal (``Collector``) into the same ``RunState`` fold and
``run_summary`` view that ``inspect`` and ``replay`` show, so the page never disagrees with them;
the timeline's bars come from ``core/views/lanes.py``, the partition grids from ``core/views/grids.py``, and
``cli/report.py`` only lays it out. No I/O here: the caller reads the journal, the lease and the
plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core import humanize
from sparkrecover.core.fold import savings
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.fold.savings import Saving
from sparkrecover.core.views.grids import grids_of
from sparkrecover.core.views.lanes import Bar, LaneFold, Mark
from sparkrecover.core.views.summary import plan_counts, run_summary

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
    started_by: str | None = None  # "launcher": a driver restarted by YARN, an operator, an orchestrator

    @property
    def story(self) -> str:
        """The attempt in one sentence: what it did to which stages, and how it ended."""
        said: dict[str, list[str]] = {}
        for bar in self.bars:
            text = bar.stage + (f" ({bar.kept}/{bar.partitions} partitions kept)" if bar.kept else "")
            said.setdefault(bar.outcome, []).append(text)
        verbs = {
            "skipped": "skipped {}",
            "lost": "found the output of {} gone",
            "invalidated": "found {} stale",
            "continued": "continued {}",
            "committed": "committed {}",
            "failed": "failed in {}",
            "interrupted": "was cut off in {}",
            "running": "is running {}",
        }
        parts = [verbs[outcome].format(", ".join(said[outcome])) for outcome in verbs if outcome in said]
        ending = {
            "succeeded": "and succeeded",
            "running": "and is still running",
            "crashed": f"and its driver died {humanize.duration(self.duration_s)} in, with no exit recorded",
        }.get(self.outcome, f"and ended ({self.exit})")
        did = "; ".join(parts) if parts else "reached no stage"
        return f"Attempt {self.attempt} {did}, {ending}."


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
    # Executors lost while an attempt ran, and what each cost ("attempt 1: executor 0 on h lost ...").
    executors_lost: list[str] = field(default_factory=list)

    @property
    def saved_s(self) -> float:
        return savings.total(self.savings)

    @property
    def saved(self) -> str:
        """What recovery saved, in the words ``submit`` and ``resume`` end with."""
        return savings.sentence(self.savings)

    @property
    def last_attempt_s(self) -> float | None:
        return self.lanes[-1].duration_s if self.lanes else None

    @property
    def from_zero_s(self) -> float | None:
        """The last attempt's own time plus what it did not have to do again: about what a run
        from zero would have taken."""
        if len(self.lanes) < 2 or not self.lanes[-1].saved_s:
            return None
        return round(self.lanes[-1].duration_s + self.lanes[-1].saved_s, 3)


def _exit_text(row: dict[str, Any]) -> str:
    if row["outcome"] == "running":
        return "running"
    if row["exit_code"] is None:
        return "driver died: no exit recorded (killed, or its host went away)"
    text = f"exit {row['exit_code']}"
    return text + (f", killed by {row['signal_name']}" if row.get("signal_name") else "")


class Collector:
    """Folds the journal once, as it streams by, into the run's state (the ``RunState`` that
    ``inspect``, ``replay`` and ``resume`` read) and the page's lanes and grids: a journal of a
    million events in bounded memory. ``state`` is ready for planning once ``feed`` returns."""

    def __init__(self, run_id: str) -> None:
        self.state = RunState(run_id)
        self.lanes = LaneFold()

    def feed(self, records: Iterable[dict[str, Any]]) -> None:
        self.state.apply_all(self._tee(records))

    def _tee(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        lanes = self.lanes.apply
        for record in records:
            lanes(record)
            yield record

    def report(
        self,
        run_dir: str,
        *,
        lease_live: bool = False,
        plan: dict[str, Any] | None = None,
        plan_problem: str | None = None,
        damage: Sequence[str] = (),
    ) -> Report:
        """The page's data: whether the lease says the run runs now, and the plan ``resume
        --dry-run`` would print (None when there is none to show; ``plan_problem`` says why
        planning failed)."""
        return _build(self, run_dir, lease_live, plan, plan_problem, damage)


def _build(
    collected: Collector,
    run_dir: str,
    lease_live: bool,
    plan: dict[str, Any] | None,
    plan_problem: str | None,
    damage: Sequence[str],
) -> Report:
    state, timing = collected.state, collected.lanes
    run_id = state.run_id
    details = run_summary(state, run_dir, lease_live=lease_live)
    saved = savings.of(state)
    lanes: list[Lane] = []
    previous_end = None
    for row in details["attempts"]:
        number = row["attempt"]
        timing.close(number, running=row["outcome"] == "running")
        origin = timing.origin.get(number)
        lane = Lane(
            number,
            row["outcome"],
            row["started"] or (state.first_ts if number == min(state.attempts) else None),
            timing.duration(number),
            None if previous_end is None or origin is None else round(max(origin - previous_end, 0.0), 3),
            _exit_text(row),
            row["app_id"],
            humanize.tally(row["plan"]) if row["plan"] else "",
            savings.total(s for s in saved if s.attempt == number),
            timing.startup.get(number),
            timing.bars.get(number, []),
            list(timing.marks.get(number, [])),
            started_by=row["started_by"],
        )
        if row["outcome"] == "crashed":
            lane.marks.append(Mark("died", lane.duration_s, "the driver died here: nothing more was journaled"))
        elif row["outcome"] in ("failed", "interrupted"):
            lane.marks.append(Mark("exit", lane.duration_s, f"attempt ended: {lane.exit}"))
        lanes.append(lane)
        previous_end = timing.last(number)
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
        savings=saved,
        grids=grids_of(state),
        stages=details["stages"],
        plan=None if plan is None else list(plan.get("stages") or []),
        plan_note=plan_problem or _plan_note(details["status"], plan),
        failure=_failure(state),
        failure_where=_failure_where(state),
        environment=_environment(state, run_dir),
        damage=list(damage),
        events=state.event_count,
        executors_lost=[f"attempt {row['attempt']}: {row['text']}" for row in details["executors_lost"]],
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
