"""What ``inspect`` shows, as plain data: the JSON output and the tables render the same dict."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from sparkrecover import lease as leases
from sparkrecover.runstate import COMMITTED, RunState, StageState


def _seconds_between(start: Optional[str], end: Optional[str]) -> Optional[float]:
    if not start or not end:
        return None
    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return round((parse(end) - parse(start)).total_seconds(), 3)


def stage_status(stage: StageState, last_attempt: int) -> str:
    """committed / skipped (this attempt read it back) / lost / running / failed / unfinished."""
    skipped = stage.skipped if stage.skipped and stage.skipped["attempt"] == last_attempt else None
    if stage.status == COMMITTED:
        if skipped and str(skipped.get("reason", "")).startswith("output lost"):
            return "lost"
        return "skipped" if skipped else "committed"
    if stage.status == "failed":
        return "failed"
    return "unfinished"


def _stage_note(stage: StageState, last_attempt: int) -> Optional[str]:
    if stage.status == "failed":
        return (stage.failed or {}).get("error")
    if stage.skipped and stage.skipped["attempt"] == last_attempt:
        return stage.skipped.get("reason")
    if stage.invalidated and stage.invalidated["attempt"] == last_attempt:
        return stage.invalidated.get("reason")
    return None


def run_summary(state: RunState, run_dir: str) -> dict[str, Any]:
    lease = leases.read_lease(run_dir)
    live = leases.is_live(lease)
    last = state.last_attempt
    last_number = last.number if last else 0
    stages = []
    for stage in state.stages.values():
        stages.append({
            "stage": stage.name,
            "kind": stage.kind,
            "status": "running" if live and stage.status == "started" and stage.attempt == last_number
            else stage_status(stage, last_number),
            "attempt": stage.committed_attempt or stage.attempt,
            "duration_s": stage.duration_s,
            "bytes": stage.bytes_written,
            "files": sum(int(o.get("file_count") or 0) for o in (stage.committed or {}).get("manifest") or [])
            if stage.committed else None,
            "spark_jobs": stage.spark_jobs,
            "spark_stages": stage.spark_stages,
            "tasks": stage.tasks,
            "failed_tasks": stage.failed_tasks,
            "reason": _stage_note(stage, last_number),
        })
    attempts = []
    for attempt in state.attempts.values():
        attempts.append({
            "attempt": attempt.number,
            "outcome": "running" if live and attempt is last and not attempt.ended else attempt.outcome,
            "exit_code": attempt.exit_code,
            "signal": attempt.signal,
            "started": attempt.started_ts,
            "ended": attempt.ended_ts,
            "duration_s": _seconds_between(attempt.started_ts, attempt.ended_ts or attempt.last_ts),
            "app_id": (attempt.driver or {}).get("app_id"),
            "resumed": attempt.plan is not None,
        })
    return {
        "run": state.run_id,
        "run_dir": run_dir,
        "app": state.run.get("app"),
        "status": state.status(lease_live=live),
        "started": state.first_ts,
        "last_activity": state.last_ts,
        "duration_s": _seconds_between(state.first_ts, state.last_ts),
        "attempts": attempts,
        "stages": stages,
        "last_error": state.last_error,
        "journal_degraded": len(state.degraded),
        "events": state.event_count,
        "lease": lease if live else None,
    }


def runs_overview(items: list[tuple[str, str, Optional[RunState], Optional[str]]]) -> list[dict[str, Any]]:
    """One row per run; a run whose journal cannot be read shows its error instead."""
    rows = []
    for run_id, run_dir, state, error in items:
        if state is None:
            rows.append({"run": run_id, "run_dir": run_dir, "status": "unreadable", "error": error})
            continue
        live = leases.is_live(leases.read_lease(run_dir))
        rows.append({
            "run": run_id, "run_dir": run_dir, "app": state.run.get("app"),
            "status": state.status(lease_live=live), "attempts": len(state.attempts),
            "started": state.first_ts, "last_activity": state.last_ts,
            "duration_s": _seconds_between(state.first_ts, state.last_ts),
        })
    rows.sort(key=lambda row: row.get("last_activity") or "", reverse=True)
    return rows
