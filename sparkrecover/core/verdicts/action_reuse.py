"""Which recorded action results a resumed attempt may replay: the command line's half
(docs/replay.md; the driver's half is driver/recall/).

The driver journals ``action.recorded`` for each action it ran (``RunState.actions`` keeps the
latest per key), with its fingerprint and the result file it kept, or why it kept none. Before
launch each is checked as far as the command line can: a result was kept and its file is still
there with its size, and the input files recorded in its fingerprint are unchanged. Files added
to an input since, and a changed plan, are the driver's to find when it reaches the action: it
compares the whole fingerprint before it replays.
"""

from __future__ import annotations

from collections.abc import Callable

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import staleness
from sparkrecover.rundir.plans import ActionEntry

# A result file's size by its path relative to the run directory (None: not there).
ResultSize = Callable[[str], "int | None"]


def replayable(
    state: RunState,
    stat: staleness.Stat,
    result_size: ResultSize,
    *,
    from_scratch: bool = False,
    replay: bool = True,
) -> list[ActionEntry]:
    """The plan's ``actions``: every recorded action, each with whether it may be replayed and why."""
    found = []
    for key, record in state.actions.items():
        result = record.get("result") if isinstance(record.get("result"), dict) else None
        fingerprint = record.get("fingerprint") if isinstance(record.get("fingerprint"), dict) else None
        reason = _why_not(record, result, fingerprint, stat, result_size, from_scratch, replay)
        entry = ActionEntry(
            key=key,
            kind=record["kind"],
            call_site=str(record.get("call_site") or ""),
            attempt=record["attempt"],
            replay=reason is None,
            reason=reason or _why(fingerprint),
            fingerprint=fingerprint,
            duration_s=float(record.get("duration_s") or 0.0),
        )
        if result is not None:
            entry.path, entry.sha256 = str(result.get("path")), str(result.get("sha256"))
            entry.bytes, entry.rows = int(result.get("bytes") or 0), result.get("rows")
        found.append(entry)
    return found


def _why_not(
    record: dict,
    result: dict | None,
    fingerprint: dict | None,
    stat: staleness.Stat,
    result_size: ResultSize,
    from_scratch: bool,
    replay: bool,
) -> str | None:
    if from_scratch:
        return "--from-scratch: runs again"
    if not replay:
        return "--no-replay: runs again"
    if result is None:
        return str(record.get("not_kept") or "its result was not kept")
    if result_size(str(result.get("path"))) != result.get("bytes"):
        return "its result file is gone or changed: runs again"
    changed = staleness.changed_inputs(fingerprint, stat)
    if changed:
        return f"input changed ({len(changed):,} file{'s' if len(changed) != 1 else ''}): runs again"
    return None


def _why(fingerprint: dict | None) -> str:
    listed = (fingerprint or {}).get("input_files")
    if listed is None:
        return "inputs checked when reached"
    return "inputs unchanged" if listed else "no input files"
