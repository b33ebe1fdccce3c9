"""``replay``: the journal as a timeline, and the run as it stood at any point of it.

The timeline is the reader's merged order (attempt, then time; the driver first on a tie), and
the state at a point is ``RunState`` folded over the events up to it, the same fold ``resume``
plans from.

``--until`` takes one of:

- ``N``: the N-th event of the timeline, as ``replay`` numbers it (from 1). Numbers are stable
  once the run has ended; while it runs, a late flush can slot events in between.
- ``ATTEMPT:WRITER:SEQ``, e.g. ``2:driver:14``: the event with that envelope, exactly. ``seq``
  counts per writer and attempt, so the three together name one event for good.
- an ISO 8601 time, e.g. ``2026-11-22T03:15:00Z`` (no offset means UTC): every event stamped
  at or before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from sparkrecover.core import humanize
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.core.verdicts.evidence import Evidence
from sparkrecover.core.views.summary import plan_counts
from sparkrecover.errors import UsageError
from sparkrecover.journal import events as ev

_ADDRESS = re.compile(r"^(\d+):([a-z]+):(\d+)$")
UNTIL_HELP = (
    "an event number as replay prints it, ATTEMPT:WRITER:SEQ (e.g. 2:driver:14) "
    "or an ISO time (e.g. 2026-11-22T03:15:00Z)"
)


@dataclass(frozen=True)
class Until:
    text: str
    index: int | None = None
    address: tuple[int, str, int] | None = None
    time: str | None = None  # in the journal's own timestamp format, so strings compare


def parse_until(text: str) -> Until:
    text = text.strip()
    if text.isdigit():
        if int(text) == 0:
            raise UsageError("--until 0: events are numbered from 1")
        return Until(text, index=int(text))
    match = _ADDRESS.match(text)
    if match:
        return Until(text, address=(int(match[1]), match[2], int(match[3])))
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"--until {text}: expected {UNTIL_HELP}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return Until(text, time=moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z")


def address(record: dict[str, Any]) -> str:
    return f"{record['attempt']}:{record['writer']}:{record['seq']}"


def cut(records: list[dict[str, Any]], until: Until) -> int:
    """How many events of the timeline ``until`` keeps (at least one)."""
    if until.index is not None:
        if until.index > len(records):
            raise UsageError(f"--until {until.text}: the journal has {len(records)} events")
        return until.index
    if until.address is not None:
        for position, record in enumerate(records, start=1):
            if (record["attempt"], record["writer"], record["seq"]) == until.address:
                return position
        raise UsageError(f"--until {until.text}: no event {until.text} in the journal")
    kept = 0
    for position, record in enumerate(records, start=1):
        if record["ts"] <= until.time:
            kept = position  # every event up to the time, even past a writer's earlier stamps
    if kept == 0:
        first = records[0]["ts"] if records else "-"
        raise UsageError(f"--until {until.text}: the journal starts later, at {first}")
    return kept


def ongoing_at(records: list[dict[str, Any]], kept: int) -> bool:
    """Whether the attempt of the last kept event went on writing after it: then it was running
    at that moment (the lease says nothing about the past)."""
    if kept == 0 or kept >= len(records):
        return False
    attempt = records[kept - 1]["attempt"]
    return any(record["attempt"] == attempt for record in records[kept:])


def plan_at(state: RunState, evidence: Evidence) -> dict[str, Any]:
    """What ``resume --dry-run`` would have printed with the journal as it stood; outputs are
    checked as they are now, there being no record of how they were then."""
    decisions = planner.make_plan(state, evidence)
    next_attempt = max(state.attempts, default=0) + 1
    return planner.dry_run_document(planner.StageDecisions(state.run_id, next_attempt, decisions))


def normalized(records: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The events of ``--json``: envelope and payload as written, numbered like the timeline."""
    for position, record in enumerate(records, start=1):
        yield {"index": position, **record}


# -- the fact that matters, per event type ----------------------------------------------------------


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in ev.ENVELOPE_KEYS}


def _run_started(r: dict[str, Any]) -> str:
    line = " ".join([str(r.get("app") or "?"), *map(str, r.get("app_args") or [])])
    options = r.get("spark_submit_args") or []
    return line + (f"  (spark-submit {' '.join(map(str, options))})" if options else "")


def _plan_created(r: dict[str, Any]) -> str:
    told = humanize.tally(plan_counts(r)) or "no stages"
    return f"plan: {told}" + (f" ({r['plan']})" if r.get("plan") else "")


def _stage_started(r: dict[str, Any]) -> str:
    parts = [str(r.get("kind") or "stage")]
    if r.get("outputs"):
        parts.append("writes " + ", ".join(map(str, r["outputs"])))
    if r.get("upstream"):
        parts.append("reads " + ", ".join(map(str, r["upstream"])))
    return "; ".join(parts)


def _stage_committed(r: dict[str, Any]) -> str:
    manifest = r.get("manifest") or []
    files = sum(int(out.get("file_count") or 0) for out in manifest)
    written = sum(int(out.get("bytes") or 0) for out in manifest)
    text = f"{files:,} files, {humanize.size(written)}"
    if r.get("rows") is not None:
        text += f", {int(r['rows']):,} rows"
    return text + f" in {humanize.duration(r.get('duration_s'))}"


def _stage_failed(r: dict[str, Any]) -> str:
    error, kind = humanize.first_line(r.get("error")), r.get("error_type")
    return error if not kind or error.startswith(kind) else f"{kind}: {error}"


def _job_ended(r: dict[str, Any]) -> str:
    if r.get("succeeded", True):
        return f"Spark job {r.get('job')} succeeded"
    return f"Spark job {r.get('job')} failed: {humanize.first_line(r.get('failure'))}"


def _spark_stage(r: dict[str, Any]) -> str:
    text = f"Spark stage {r.get('spark_stage')}.{r.get('spark_attempt', 0)}: {r.get('tasks', 0):,} tasks"
    if r.get("failed_tasks"):
        text += f", {r['failed_tasks']:,} failed"
    written = (r.get("metrics") or {}).get("output_records")
    if written:
        text += f", {written:,} rows written"
    if r.get("failure"):
        text += f"; failed: {humanize.first_line(r['failure'])}"
    if isinstance(r.get("spark_shuffle"), int):
        text += f" (map stage of Spark shuffle {r['spark_shuffle']})"
    return text


def _executor_lost(r: dict[str, Any]) -> str:
    where = f" on {r['host']}" if r.get("host") else ""
    return f"executor {r.get('executor')}{where} lost: {humanize.first_line(r.get('reason'))}"


def _shuffle_served(r: dict[str, Any]) -> str:
    served, again = r.get("served"), r.get("recomputed")
    served = served if isinstance(served, list) else []
    again = again if isinstance(again, list) else []
    if not r.get("shuffle"):  # not kept (an INDETERMINATE stage, ...): all of them run again
        return f"a shuffle not kept: {len(again)} map outputs of lost executor {r.get('executor')} computed again"
    text = f"shuffle {str(r.get('shuffle'))[:12]}: {len(served)} map outputs of lost executor {r.get('executor')}"
    text += " served from copies"
    return text + (f", {len(again)} computed again (copy not yet durable)" if again else "")


def _degraded(r: dict[str, Any]) -> str:
    text = f"storage failed {r.get('since')} .. {r.get('until')}: {humanize.first_line(r.get('error'))}"
    return text + (f"; {r['dropped_bytes']:,} bytes of events dropped" if r.get("dropped_bytes") else "")


def _exit(r: dict[str, Any]) -> str:
    text = f"exit {r.get('exit_code')}"
    if r.get("signal"):
        text += f" (killed by {humanize.signal_name(r['signal'])})"
    if r.get("error"):
        text += f": {humanize.first_line(r['error'])}"
    return text


def _write_started(r: dict[str, Any]) -> str:
    kept = len(r.get("kept") or [])
    text = f"{r.get('partitions')} partitions" + (f", {kept} kept from earlier attempts" if kept else "")
    if not r.get("reusable"):
        text += f"; partitions not reusable: {humanize.first_line(r.get('reason'))}"
    elif r.get("reason"):  # reusable later, but nothing of an earlier attempt kept now
        text += f"; nothing kept: {humanize.first_line(r.get('reason'))}"
    return text


def _task_committed(r: dict[str, Any]) -> str:
    written = f", {r['records']:,} rows" if isinstance(r.get("records"), int) else ""
    return f"partition {r.get('partition')} (task attempt {r.get('task_attempt', 0)}){written}"


def _read(r: dict[str, Any]) -> str:
    paths = r.get("paths") or []
    where = " ".join(paths[:2]) + (f" (+{len(paths) - 2} more)" if len(paths) > 2 else "")
    return f"{r.get('format')} {where}".rstrip()


def _schema_inferred(r: dict[str, Any]) -> str:
    columns = len((r.get("schema") or {}).get("fields") or [])
    count = int(r.get("input_count") or 0)
    return (
        f"{_read(r)}: {columns} column{'s' if columns != 1 else ''} inferred from {count:,} "
        f"input file{'s' if count != 1 else ''} in {humanize.duration(r.get('duration_s'))}"
    )


def _schema_reused(r: dict[str, Any]) -> str:
    count = int(r.get("input_count") or 0)
    return (
        f"{_read(r)}: schema inferred in attempt {r.get('inferred_in')} reused, {count:,} "
        f"input file{'s' if count != 1 else ''} unchanged, {humanize.duration(r.get('duration_s'))}"
    )


def _action_recorded(r: dict[str, Any]) -> str:
    summary = f": {r['summary']}" if r.get("summary") else ""
    done = f"{r.get('key')}{summary} in {humanize.duration(r.get('duration_s'))}"
    result = r.get("result") if isinstance(r.get("result"), dict) else None
    kept = f", result kept ({humanize.size(int(result.get('bytes') or 0))})" if result else ""
    if result and isinstance(r.get("model_bytes"), int):  # its folder is what it keeps, not the small result file
        kept = f", model kept ({humanize.size(int(result.get('bytes') or 0) + r['model_bytes'])})"
    why = f", not kept: {r['not_kept']}" if r.get("not_kept") else ""
    ran = r.get("ran_because")
    return done + kept + why + (f" (ran: {ran})" if ran and ran != "no record" else "")


def _action_replayed(r: dict[str, Any]) -> str:
    if r.get("model"):  # a fit or train: its model read back (Spark jobs of a load, no training)
        models = f"{r['models']} models" if isinstance(r.get("models"), int) else "model"
        name = str(r["model"]).rpartition(".")[2]
        return (
            f"{r.get('key')}: {models} of attempt {r.get('recorded_in')} loaded ({name}), "
            f"not trained again (training took {humanize.duration(r.get('saved_s'))})"
        )
    rows = r.get("rows")
    what = f", {rows:,} row{'s' if rows != 1 else ''}" if isinstance(rows, int) else ""
    return (
        f"{r.get('key')}: result of attempt {r.get('recorded_in')} replayed{what}, no Spark job "
        f"(it took {humanize.duration(r.get('saved_s'))})"
    )


def _shuffle_registered(r: dict[str, Any]) -> str:
    text = (
        f"shuffle {str(r.get('shuffle'))[:12]}: {r.get('maps')} map tasks, {r.get('reused') or 0} kept outputs reused"
    )
    if r.get("reuse_refused"):
        text += f" (not reused: {r['reuse_refused']})"
    if r.get("bounds") and r.get("bounds") != r.get("sampled_bounds"):
        text += ", partitioned by the kept range bounds, not its own sample"
    return text


def _shuffle_committed(r: dict[str, Any]) -> str:
    maps = [m.get("map") for m in r.get("maps") or [] if isinstance(m, dict)]
    size = sum(int(m.get("data_bytes") or 0) for m in r.get("maps") or [] if isinstance(m, dict))
    if isinstance(r.get("kept_so_far"), int):  # a follow view's milestone (shuffle_milestones)
        return f"shuffle {str(r.get('shuffle'))[:12]}: {r['kept_so_far']:,}/{r.get('of') or '?'} map outputs kept"
    which = ", ".join(f"#{index}" for index in maps)
    plural = "s" if len(maps) != 1 else ""
    return f"shuffle {str(r.get('shuffle'))[:12]}: map output{plural} {which} kept ({humanize.size(size)})"


def shuffle_milestones(
    records: list[dict[str, Any]], shuffles: dict[str, Any], shown: dict[str, int]
) -> list[dict[str, Any]]:
    """``records`` for a log a person reads (``inspect --follow`` on a pipe): a map stage keeps its
    outputs one or two a record, hundreds of lines; instead, a shuffle's ``shuffle.committed`` is
    shown when its kept map outputs first pass a quarter of its map tasks (``shuffles``: the run
    state's, after these records; ``shown``: the last count shown per shuffle, kept by the caller)."""
    found = []
    for record in records:
        if record["type"] != ev.SHUFFLE_COMMITTED:
            found.append(record)
            continue
        state = shuffles.get(str(record.get("shuffle")))
        if state is None or not state.maps:
            continue
        before, now = shown.get(state.identity, 0), state.kept_count
        if now * 4 // state.maps > before * 4 // state.maps or (now >= state.maps > before):
            shown[state.identity] = now
            found.append({**record, "kept_so_far": min(now, state.maps), "of": state.maps})
    return found


_FACTS: dict[str, Callable[[dict[str, Any]], str]] = {
    ev.RUN_STARTED: _run_started,
    ev.ATTEMPT_STARTED: lambda r: (
        f"spark-submit started by pid {r.get('pid')}"
        if r.get("started_by") != "launcher"
        else f"restarted by the launcher: driver pid {r.get('pid')} took the next attempt"
        if r.get("attempt", 1) > 1
        else f"started by the launcher: driver pid {r.get('pid')} took attempt 1"
    ),
    ev.PLAN_CREATED: _plan_created,
    ev.DRIVER_STARTED: lambda r: (
        f"{r.get('app_id')} on {r.get('master')} ({r.get('deploy_mode')}), Spark {r.get('spark_version')}"
    ),
    ev.STAGE_STARTED: _stage_started,
    ev.STAGE_COMMITTED: _stage_committed,
    ev.STAGE_SKIPPED: lambda r: str(r.get("reason") or ""),
    ev.STAGE_INVALIDATED: lambda r: str(r.get("reason") or ""),
    ev.STAGE_FAILED: _stage_failed,
    ev.WRITE_STARTED: _write_started,
    ev.TASK_COMMITTED: _task_committed,
    ev.SHUFFLE_REGISTERED: _shuffle_registered,
    ev.SHUFFLE_COMMITTED: _shuffle_committed,
    ev.SHUFFLE_UNSUPPORTED: lambda r: f"map outputs not kept: {r.get('reason')}",
    ev.SPARK_JOB_STARTED: lambda r: f"Spark job {r.get('job')}",
    ev.SPARK_JOB_ENDED: _job_ended,
    ev.SPARK_STAGE_COMPLETED: _spark_stage,
    ev.EXECUTOR_LOST: _executor_lost,
    ev.SHUFFLE_SERVED: _shuffle_served,
    ev.SPARK_EXECUTOR_REMOVED: lambda r: f"executor {r.get('executor')}: {humanize.first_line(r.get('reason'))}",
    ev.JOURNAL_DEGRADED: _degraded,
    ev.DRIVER_ENDED: _exit,
    ev.ATTEMPT_ENDED: _exit,
    ev.SCHEMA_INFERRED: _schema_inferred,
    ev.SCHEMA_REUSED: _schema_reused,
    ev.ACTION_RECORDED: _action_recorded,
    ev.ACTION_REPLAYED: _action_replayed,
}


def fact(record: dict[str, Any]) -> str:
    """The one thing worth knowing about an event, on one line."""
    describe = _FACTS.get(record["type"])
    if describe is None:  # an event type this version does not know: show its payload as is
        payload = {k: v for k, v in _payload(record).items() if k != "stage"}
        return humanize.first_line(orjson.dumps(payload, default=str).decode())
    try:
        return humanize.first_line(describe(record))
    except (TypeError, ValueError, AttributeError):  # a payload of an unexpected shape is shown raw
        return humanize.first_line(orjson.dumps(_payload(record), default=str).decode())
