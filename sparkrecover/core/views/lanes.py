"""The timeline of ``sparkrecover report`` as data: for each attempt, a bar per stage it reached
(on the journal's clock, from the attempt's first event) and the marks of what happened to the
attempt itself. What each resume saved is core/fold/savings.py's.

Fed every record of the journal in the reader's order, once (``LaneFold.apply``): Spark's
telemetry, most of a long journal, costs a type lookup and a string comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sparkrecover.core import humanize
from sparkrecover.journal import events as ev


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


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _target(record: dict[str, Any]) -> str:
    target = record.get("target") or ", ".join(str(o) for o in record.get("outputs") or [])
    return str(target)


class LaneFold:
    """The bars and marks of each attempt, from the records in order."""

    def __init__(self) -> None:
        self.origin: dict[int, float] = {}  # attempt -> its first event (seconds)
        self.last_ts: dict[int, str] = {}  # attempt -> its latest timestamp (the journal's text)
        self.bars: dict[int, list[Bar]] = {}
        self.open: dict[tuple[int, str], Bar] = {}
        self.marks: dict[int, list[Mark]] = {}
        self.startup: dict[int, float] = {}

    def last(self, attempt: int) -> float | None:
        ts = self.last_ts.get(attempt)
        return None if ts is None else _seconds(ts)

    def duration(self, attempt: int) -> float:
        last = self.last(attempt)
        return 0.0 if last is None else round(last - self.origin[attempt], 3)

    def apply(self, record: dict[str, Any]) -> None:
        attempt, ts, kind = record["attempt"], record["ts"], record["type"]
        # One timestamp format throughout: the text compares as the time does.
        latest = self.last_ts.get(attempt)
        if latest is None:
            self.origin[attempt] = _seconds(ts)
        if latest is None or ts > latest:
            self.last_ts[attempt] = ts
        if kind not in _TIMED:
            return
        at = _seconds(ts)
        offset = round(max(at - self.origin[attempt], 0.0), 3)
        name = str(record.get("stage"))
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
        elif kind in (ev.STAGE_SKIPPED, ev.STAGE_INVALIDATED):
            self._skipped_or_stale(attempt, record, offset)
        elif kind == ev.WRITE_STARTED:
            self._write_started(attempt, record)
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

    def _write_started(self, attempt: int, record: dict[str, Any]) -> None:
        kept = {p for p in record.get("kept") or [] if isinstance(p, int)}
        bar = self.open.get((attempt, record["stage"]))
        if bar is not None and kept:
            bar.kept, bar.partitions = len(kept), int(record.get("partitions") or 0)
            bar.reason = f"{len(kept)}/{bar.partitions} partitions kept from earlier attempts"

    def _mark(self, attempt: int, kind: str, offset: float, label: str) -> None:
        self.marks.setdefault(attempt, []).append(Mark(kind, offset, label))

    def close(self, attempt: int, running: bool) -> None:
        """Bars still open when the attempt's events stop were cut off by its end (or still run)."""
        end = self.duration(attempt)
        for (number, name), bar in list(self.open.items()):
            if number == attempt:
                bar.end_s = end
                bar.outcome = "running" if running else "interrupted"
                del self.open[(number, name)]


# The events that draw something; every other one only moves its attempt's clock on.
_TIMED = frozenset(
    {
        ev.STAGE_STARTED,
        ev.STAGE_COMMITTED,
        ev.STAGE_FAILED,
        ev.STAGE_SKIPPED,
        ev.STAGE_INVALIDATED,
        ev.WRITE_STARTED,
        ev.DRIVER_STARTED,
        ev.LEASE_LOST,
        ev.JOURNAL_DEGRADED,
        ev.SPARK_EXECUTOR_REMOVED,
    }
)
