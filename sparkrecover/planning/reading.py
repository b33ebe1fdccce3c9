"""A run read from storage for the core to fold: the core decides and shows, this module reads.
Each command folds a run's journal once: ``load_state`` before it launches anything, ``catch_up``
for what the attempts it launched added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views.report_data import Collector
from sparkrecover.errors import JournalDamagedError, JournalError, RunNotFoundError
from sparkrecover.journal.reader import iter_journal, read_journal, read_salvaged
from sparkrecover.journal.tail import JournalTail
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir.runs import Run


def load_state(run: Run, warn: Callable[[str], None] | None = None) -> RunState:
    """The run folded as the journal streams by: a million events in bounded memory."""
    if not run.has_journal():
        raise RunNotFoundError(f"no run {run.id!r} at {run.dir}")
    for _ in range(3):
        try:
            state = RunState.from_events(run.id, iter_journal(run.dir, warn))
            break
        except FileNotFoundError:  # a segment compacted away mid-read: fold the new listing
            continue
    else:
        raise JournalError(f"{run.dir}: journal segments kept disappearing while being read")
    if not state.event_count:
        raise RunNotFoundError(f"run {run.id!r} at {run.dir} has an empty journal")
    return state


def catch_up(state: RunState | None, run: Run, since: int, warn: Callable[[str], None] | None = None) -> RunState:
    """The run as the journal says now, after the attempts from ``since`` on: ``state`` (None:
    nothing folded yet) with those attempts' records folded in, without folding the earlier
    attempts again (the reader's order is by attempt, so folding on is folding whole). ``state``
    must hold none of those attempts' records. A segment compacted away mid-read leaves ``state``
    half-way: the run is then folded whole, once more."""
    if state is None:
        return load_state(run, warn)
    try:
        state.apply_all(iter_journal(run.dir, warn, since=since))
    except FileNotFoundError:
        return load_state(run, warn)
    return state


def load_records(run: Run, warn: Callable[[str], None] | None = None) -> list[dict]:
    """The run's events in the reader's order; a missing or empty journal is an unknown run."""
    if not run.has_journal():
        raise RunNotFoundError(f"no run {run.id!r} at {run.dir}")
    records = read_journal(run.dir, warn)
    if not records:
        raise RunNotFoundError(f"run {run.id!r} at {run.dir} has an empty journal")
    return records


def load_report(run: Run, warn: Callable[[str], None] | None = None) -> tuple[Collector, list[str]]:
    """The run folded for ``report`` as the journal streams by, and the damage found in it: a
    damaged journal is read around its damage (``read_salvaged``) rather than refused."""
    if not run.has_journal():
        raise RunNotFoundError(f"no run {run.id!r} at {run.dir}")
    for _ in range(3):
        collected, damage = Collector(run.id), []
        try:
            collected.feed(iter_journal(run.dir, warn))
        except FileNotFoundError:  # a segment compacted away mid-read: fold the new listing
            continue
        except JournalDamagedError as problem:
            collected = Collector(run.id)
            records, damaged = read_salvaged(run.dir, warn)
            collected.feed(records)
            damage = [str(problem), *(f"damaged segment {s.url}: its readable lines are shown" for s in damaged)]
        break
    else:
        raise JournalError(f"{run.dir}: journal segments kept disappearing while being read")
    if not collected.state.event_count:
        raise RunNotFoundError(f"run {run.id!r} at {run.dir} has an empty journal")
    return collected, damage


def live_lease(run_dir: str) -> dict[str, Any] | None:
    """The run's lease record while someone holds it; None when nobody does (released or stale)."""
    lease = leases.read_lease(run_dir)
    return lease if leases.is_live(lease) else None


class WatchedRun:
    """A run as ``core/watch.follow`` polls it: who holds its lease now, and what its journal gained."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.tail = JournalTail(run_dir)

    def lease_live(self) -> bool:
        return live_lease(self.run_dir) is not None

    @property
    def found_journal(self) -> bool:
        return self.tail.found_journal

    def poll(self) -> list[dict[str, Any]]:
        return self.tail.poll()

    def drain(self) -> tuple[list[dict[str, Any]], list[str]]:
        return self.tail.drain()
