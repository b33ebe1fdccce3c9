"""``inspect --follow``: fold a run's journal as it is written, until the run ends.

Every poll reads only what the journal's segments gained (``JournalTail``) and applies the new
events to one ``RunState``. The run has ended when

- its latest attempt recorded ``attempt.ended`` and nobody holds the run's lease, or
- nobody holds the lease (it was released, or went stale: dead pid on this host, heartbeat
  older than its TTL elsewhere) although the latest attempt never recorded its end: the process
  that ran it died.

The lease is read *before* the journal on every poll: a CLI writes ``attempt.ended`` before it
releases the lease, so once the lease is seen gone, the poll that follows sees that record if
there is one, and a clean end is never mistaken for a crash.

A run that is not running when following starts, and did not succeed, is watched for
``START_GRACE`` seconds before following ends: a follower started just before ``resume`` would
otherwise stop on the last attempt's end while the next one is being planned and launched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.errors import RunNotFoundError

POLL_INTERVAL = 0.5  # seconds; on an object store each poll is one LIST plus a GET per grown segment
START_GRACE = 5.0  # seconds a follower waits for a resume of a run that is not running when it starts


@dataclass
class Update:
    state: RunState
    new: list[dict[str, Any]] = field(default_factory=list)
    live: bool = False
    ended: str | None = None  # why following stopped; None while the run goes on
    warnings: list[str] = field(default_factory=list)


class Watched(Protocol):
    """The run being followed, as storage shows it (``planning/reading.WatchedRun``)."""

    run_dir: str

    def lease_live(self) -> bool: ...

    @property
    def found_journal(self) -> bool: ...

    def poll(self) -> list[dict[str, Any]]: ...

    def drain(self) -> tuple[list[dict[str, Any]], list[str]]: ...


def follow(
    run: Watched,
    run_id: str,
    *,
    interval: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    grace: float | None = None,
) -> Iterator[Update]:
    """One ``Update`` per poll; the last one has ``ended`` set."""
    interval = POLL_INTERVAL if interval is None else interval
    grace = START_GRACE if grace is None else grace
    tail = run
    state = RunState(run_id)
    waited, seen_live = 0.0, False
    while True:
        live = run.lease_live()
        new = tail.poll()
        if not tail.found_journal and not live:
            raise RunNotFoundError(f"no run {run_id!r} at {run.run_dir}")
        for record in new:
            state.apply(record)
        seen_live = seen_live or live
        ended = _ended(state, live)
        if ended is not None and not seen_live and waited < grace and not state.succeeded:
            ended = None  # maybe a resume is taking the lease: give it a moment
            waited += interval
        if ended is None:
            yield Update(state, new, live)
            sleep(interval)
            continue
        late, warnings = tail.drain()
        for record in late:
            state.apply(record)
        yield Update(state, new + late, live, ended, warnings)
        return


def _ended(state: RunState, live: bool) -> str | None:
    if live:
        return None
    last = state.last_attempt
    if last is None:
        return "nobody is running this run and its journal is empty"
    if last.ended:
        return f"attempt {last.number} ended: {last.outcome} (exit {last.exit_code})"
    return f"attempt {last.number} {last.outcome}: nobody holds the run's lease and the attempt never recorded its end"
