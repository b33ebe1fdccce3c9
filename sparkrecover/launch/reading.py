"""A run read from storage for the core to fold: the core decides and shows, this module reads."""

from __future__ import annotations

from collections.abc import Callable

from sparkrecover.core.runstate import RunState
from sparkrecover.errors import JournalError, RunNotFoundError
from sparkrecover.journal.reader import iter_journal, read_journal
from sparkrecover.rundir import runs


def load_state(run_dir: str, run_id: str, warn: Callable[[str], None] | None = None) -> RunState:
    """The run folded as the journal streams by: a million events in bounded memory."""
    if not runs.has_journal(run_dir):
        raise RunNotFoundError(f"no run {run_id!r} at {run_dir}")
    for _ in range(3):
        try:
            state = RunState.from_events(run_id, iter_journal(run_dir, warn))
            break
        except FileNotFoundError:  # a segment compacted away mid-read: fold the new listing
            continue
    else:
        raise JournalError(f"{run_dir}: journal segments kept disappearing while being read")
    if not state.event_count:
        raise RunNotFoundError(f"run {run_id!r} at {run_dir} has an empty journal")
    return state


def load_records(run_dir: str, run_id: str, warn: Callable[[str], None] | None = None) -> list[dict]:
    """The run's events in the reader's order; a missing or empty journal is an unknown run."""
    if not runs.has_journal(run_dir):
        raise RunNotFoundError(f"no run {run_id!r} at {run_dir}")
    records = read_journal(run_dir, warn)
    if not records:
        raise RunNotFoundError(f"run {run_id!r} at {run_dir} has an empty journal")
    return records
