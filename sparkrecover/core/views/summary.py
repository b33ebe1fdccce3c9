"""What ``inspect`` shows, as plain data: the JSON output and the tables render the same dict."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sparkrecover.core import humanize
from sparkrecover.core.fold import kept_shuffles, savings
from sparkrecover.core.fold.runstate import COMMITTED, STARTED, AttemptState, RunState, StageState
from sparkrecover.core.views.recalled import action_rows


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return round((parse(end) - parse(start)).total_seconds(), 3)


def stage_status(stage: StageState, last_attempt: int) -> str:
    """committed / skipped (this attempt read it back) / lost / invalidated / running / failed /
    unfinished."""
    if stage.last_event == "invalidated":
        return "invalidated"  # the driver found it stale and has not rebuilt it yet
    skipped = stage.skipped if stage.skipped and stage.skipped["attempt"] == last_attempt else None
    if stage.status == COMMITTED:
        if skipped and str(skipped.get("reason", "")).startswith("output lost"):
            return "lost"
        return "skipped" if skipped else "committed"
    if stage.status == "failed":
        return "failed"
    return "unfinished"


def _stage_note(stage: StageState, last_attempt: int) -> str | None:
    if stage.status == "failed":
        return (stage.failed or {}).get("error")
    if stage.skipped and stage.skipped["attempt"] == last_attempt:
        return stage.skipped.get("reason")
    if stage.invalidated and stage.invalidated["attempt"] == last_attempt:
        return stage.invalidated.get("reason")
    return None


def _event_note(record: dict[str, Any] | None) -> dict[str, Any] | None:
    return {"attempt": record["attempt"], "reason": record.get("reason")} if record else None


def _partitions(stage: StageState) -> dict[str, Any] | None:
    """Task-level progress: of an unfinished write, the partitions committed (by attempt); of a
    committed write that kept some, kept, computed and by attempt. None for a write that was whole."""
    progress = stage.partitions
    if progress is not None and stage.write_progress is not None:
        return {**progress, "by_attempt": stage.write_progress.by_attempt()}
    if stage.kept_write is not None:
        return {key: stage.kept_write[key] for key in ("kept", "computed", "total", "by_attempt", "kept_from")}
    return None


def _stage_row(stage: StageState, last_number: int, live: bool) -> dict[str, Any]:
    committed = stage.committed
    running = live and stage.status == STARTED and stage.attempt == last_number
    # The tasks of an unfinished write that committed count too: Spark reports a stage's tasks
    # only when it completes, and the attempt died before.
    unfinished = stage.partitions["committed"] if stage.partitions else 0
    return {
        "stage": stage.name,
        "kind": stage.kind,
        "status": "running" if running else stage_status(stage, last_number),
        "attempt": stage.committed_attempt or stage.attempt,
        "duration_s": stage.duration_s,
        "rows": stage.rows,
        "bytes": stage.bytes_written,
        "files": sum(int(o.get("file_count") or 0) for o in committed.get("manifest") or []) if committed else None,
        "spark_jobs": stage.spark_jobs,
        "spark_stages": stage.spark_stages,
        "failed_spark_stages": stage.failed_spark_stages,
        "tasks": max(stage.tasks, unfinished),
        "failed_tasks": stage.failed_tasks,
        "partitions": _partitions(stage),
        "reason": _stage_note(stage, last_number),
        "error": (stage.failed or {}).get("error") if stage.status == "failed" else None,
        "skipped": _event_note(stage.skipped),
        "invalidated": _event_note(stage.invalidated),
    }


def plan_counts(plan: dict[str, Any]) -> dict[str, int]:
    """How many stages a plan.created event skips, runs, reruns or reports lost."""
    counts: dict[str, int] = {}
    for entry in plan.get("stages") or []:
        counts[entry.get("decision", "?")] = counts.get(entry.get("decision", "?"), 0) + 1
    return counts


def _attempt_row(attempt: AttemptState, running: bool) -> dict[str, Any]:
    return {
        "attempt": attempt.number,
        "outcome": "running" if running else attempt.outcome,
        "exit_code": attempt.exit_code,
        "signal": attempt.signal,
        "signal_name": humanize.signal_name(attempt.signal) if attempt.signal else None,
        "started": attempt.started_ts,
        "ended": attempt.ended_ts,
        "duration_s": _seconds_between(attempt.started_ts, attempt.ended_ts or attempt.last_ts),
        "app_id": (attempt.driver or {}).get("app_id"),
        "resumed": attempt.plan is not None,
        # submit, resume, or "launcher": a driver YARN, an operator or an orchestrator ran again
        "started_by": attempt.started_by,
        "plan": None if attempt.plan is None else plan_counts(attempt.plan),
    }


def run_summary(
    state: RunState, run_dir: str, *, lease_live: bool, lease: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Everything ``inspect RUN`` shows. ``lease_live``: someone runs the run now (``replay`` says
    whether someone did at the moment it shows); ``lease``: the live lease's record, if read."""
    live = lease_live
    last = state.last_attempt
    last_number = last.number if last else 0
    stages = [_stage_row(stage, last_number, live) for stage in state.stages.values()]
    attempts = [
        _attempt_row(attempt, live and attempt is last and not attempt.ended) for attempt in state.attempts.values()
    ]
    status = state.status(lease_live=live)
    return {
        "run": state.run_id,
        "run_dir": run_dir,
        "root": run_dir.rstrip("/").rsplit("/", 1)[0],
        "app": state.run.get("app"),
        "status": status,
        "started": state.first_ts,
        "last_activity": state.last_ts,
        "duration_s": _seconds_between(state.first_ts, state.last_ts),
        "busy_s": round(sum(a["duration_s"] or 0.0 for a in attempts), 3),
        "attempts": attempts,
        "stages": stages,
        # Where the last attempt stopped: its stages that started and never committed nor failed.
        "stopped_in": []
        if status in ("running", "succeeded")
        else [
            stage.name for stage in state.stages.values() if stage.status == STARTED and stage.attempt == last_number
        ],
        "last_error": state.last_error,
        "journal_degraded": len(state.degraded),
        # Map progress per shuffle (kept map outputs, docs/shuffles.md), and why some could not be kept.
        "shuffles": kept_shuffles.rows(state.shuffles),
        "shuffles_unsupported": _unsupported(state),
        # Executors lost, and what each cost: map tasks run again, map outputs served from copies.
        "executors_lost": [{**loss.row(), "text": loss.describe()} for loss in state.lost_executors.losses],
        "actions": action_rows(state),
        "events": state.event_count,
        "lease": lease if live else None,
    }


def _unsupported(state: RunState) -> list[dict[str, Any]]:
    """Why map outputs were not kept, once per attempt, stage and reason, with the Spark shuffles
    each reason applies to (a query of twenty shuffles says it once, not twenty times)."""
    groups: dict[tuple[int, str | None, str], dict[str, Any]] = {}
    for refused in state.shuffles_unsupported:
        group = groups.setdefault(
            (refused.attempt, refused.stage, refused.reason),
            {"attempt": refused.attempt, "stage": refused.stage, "reason": refused.reason, "spark_shuffles": []},
        )
        if refused.spark_shuffle is not None:
            group["spark_shuffles"].append(refused.spark_shuffle)
    return list(groups.values())[-20:]


def runs_overview(items: list[tuple[str, str, RunState | None, str | None, bool]]) -> list[dict[str, Any]]:
    """One row per run (id, folder, state, why it cannot be read, whether its lease is live); a run
    whose journal cannot be read shows its error instead."""
    rows: list[dict[str, Any]] = []
    for run_id, run_dir, state, error, live in items:
        if state is None:
            rows.append({"run": run_id, "run_dir": run_dir, "status": "unreadable", "error": error})
            continue
        rows.append(
            {
                "run": run_id,
                "run_dir": run_dir,
                "app": state.run.get("app"),
                "status": state.status(lease_live=live),
                "attempts": len(state.attempts),
                "stages": len(state.stages),
                "stages_committed": sum(1 for stage in state.stages.values() if stage.status == COMMITTED),
                "started": state.first_ts,
                "last_activity": state.last_ts,
                "duration_s": _seconds_between(state.first_ts, state.last_ts),
            }
        )
    rows.sort(key=lambda row: row.get("last_activity") or "", reverse=True)
    return rows


def _what_happened(stage: StageState, first_attempt: int) -> tuple[str | None, int]:
    """What the attempts from ``first_attempt`` on did with a stage, from its events: skipped,
    lost (skipped, its output gone), continued (and how many partitions its write kept), run, or
    None (not reached)."""
    started = stage.started or {}
    if started.get("attempt", 0) >= first_attempt:
        progress = stage.write_progress
        if progress is not None and progress.attempt >= first_attempt and progress.kept:
            return "continued", len(progress.kept)
        return "run", 0
    skipped = stage.skipped or {}
    if skipped.get("attempt", 0) >= first_attempt:
        return ("lost" if str(skipped.get("reason") or "").startswith("output lost") else "skipped"), 0
    if stage.spark_attempt >= first_attempt and stage.committed is None:
        return "run", 0  # stopped in the Spark jobs it runs before it starts (a write's map stage)
    return None, 0


def command_summary(state: RunState, first_attempt: int, exit_code: int) -> dict[str, Any]:
    """What one ``submit`` or ``resume`` did, from its first attempt on (automatic retries
    included): the document ``--json`` prints and the summary the command ends with."""
    ours = [attempt for number, attempt in sorted(state.attempts.items()) if number >= first_attempt]
    last = state.last_attempt
    last_number = last.number if last else 0
    planned: dict[str, dict[str, Any]] = {}
    for attempt in ours:
        if attempt is ours[-1]:
            planned = {entry["stage"]: entry for entry in (attempt.plan or {}).get("stages") or []}
    saved = savings.of(state, [attempt.number for attempt in ours])
    stages: list[dict[str, Any]] = []
    for stage in state.stages.values():
        entry = planned.get(stage.name, {})
        did, kept = _what_happened(stage, first_attempt) if ours else (None, 0)
        stages.append(
            {
                "stage": stage.name,
                # A first attempt has no plan: everything runs. No attempt launched: no decision.
                "decision": entry.get("decision", "run") if ours else None,
                # What the attempts did with it, as the journal shows (not what the plan said).
                "did": did,
                "outcome": stage_status(stage, last_number),
                "attempt": stage.committed_attempt or stage.attempt,
                "partitions": entry.get("partitions"),
                "kept_partitions": kept,
                "reason": entry.get("reason"),
            }
        )
    return {
        "run": state.run_id,
        "outcome": state.status(),
        "exit_code": exit_code,
        "attempts": [
            {
                "attempt": attempt.number,
                "outcome": attempt.outcome,
                "exit_code": attempt.exit_code,
                "signal_name": humanize.signal_name(attempt.signal) if attempt.signal else None,
                "plan": None if attempt.plan is None else plan_counts(attempt.plan),
            }
            for attempt in ours
        ],
        "stages": stages,
        "kept_partitions": sum(row["kept_partitions"] for row in stages),
        "saved_s": savings.total(saved),
        # Resumes only: a first attempt reuses nothing, and has nothing to say about it.
        "saved": savings.sentence(saved) if any(attempt.plan is not None for attempt in ours) else None,
    }


def command_lines(document: dict[str, Any]) -> list[str]:
    """The summary ``submit`` and ``resume`` end with, after the application's own output."""
    attempts = document["attempts"]
    numbers = [row["attempt"] for row in attempts]
    which = (
        f"attempt {numbers[0]}"
        if len(numbers) == 1
        else f"attempts {numbers[0]}-{numbers[-1]}"
        if numbers
        else "no attempt launched"
    )
    lines = [f"run {document['run']}: {document['outcome']} (exit {document['exit_code']}), {which}"]
    if not attempts:
        return lines
    counts: dict[str | None, int] = {}
    # A stage the last attempt was running when it was stopped or killed did not run: it was cut off
    # (as inspect and the report word it), and a resume continues it.
    stopped = attempts[-1]["outcome"] in ("interrupted", "crashed")
    for row in document["stages"]:
        did = row["did"]
        if stopped and did in ("run", "continued") and row["outcome"] == "unfinished":
            did = "cut off"
        counts[did] = counts.get(did, 0) + 1
    if document["stages"]:
        parts = [f"{counts.get('skipped', 0)} skipped"]
        if counts.get("continued"):
            parts.append(f"{counts['continued']} continued ({document['kept_partitions']:,} partitions kept)")
        parts.append(f"{counts.get('run', 0)} run")
        if counts.get("cut off"):
            parts.append(f"{counts['cut off']} cut off")
        if counts.get("lost"):
            parts.append(f"{counts['lost']} lost")
        if counts.get(None):
            parts.append(f"{counts[None]} not reached")
        lines.append(f"stages: {', '.join(parts)} (of {len(document['stages'])})")
    else:
        lines.append("stages: none recorded")
    if document.get("saved"):
        lines.append(document["saved"])
    return lines
