"""``sparkrecover replay``."""

from __future__ import annotations

from typing import Any

from sparkrecover.cli import render
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views import summary, timeline
from sparkrecover.errors import EXIT_JOURNAL, UsageError
from sparkrecover.planning import reading
from sparkrecover.planning.storage_evidence import StorageEvidence
from sparkrecover.rundir import runs, storage
from sparkrecover.rundir.runs import Run


def run(*, run: str, root: str | None, until: str | None, verify: bool, json_output: bool) -> int:
    # Bad input fails before any storage is touched.
    target = timeline.parse_until(until) if until is not None else None
    if verify and target is not None:
        raise UsageError("--verify checks the whole journal: it takes no --until")
    resolved = runs.resolve_run(run, storage.resolve_root(root))
    if verify:
        return _verify(resolved, json_output)
    records = reading.load_records(resolved, render.warning)
    kept = timeline.cut(records, target) if target else len(records)
    shown = records[:kept]
    state = RunState.from_events(resolved.id, shown)
    plan = None
    if target:
        details = summary.run_summary(state, resolved.dir, lease_live=timeline.ongoing_at(records, kept))
        with render.file_progress(enabled=not json_output) as progress:
            plan = timeline.plan_at(state, StorageEvidence(resolved.dir, "size", progress))
    else:
        lease = reading.live_lease(resolved.dir)
        details = summary.run_summary(state, resolved.dir, lease_live=lease is not None, lease=lease)
    if json_output:
        document: dict[str, Any] = {
            "run": resolved.id,
            "run_dir": resolved.dir,
            "until": _stop(target, shown),
            "events": list(timeline.normalized(shown)),
            "state": details,
        }
        if plan is not None:
            document["plan"] = plan
        render.emit_json(document)
        return 0
    render.info(f"journal of run {resolved.id} at {resolved.dir}: {len(records):,} events", render.report())
    # As wide as the longest name (as shown: shortened on a terminal), so every fact lines up.
    width = max([5, *(len(render.stage_name(r.get("stage") or "")) for r in shown)])
    render.timeline(shown, timeline.fact, stage_width=width)
    if plan is None:
        committed = sum(1 for row in details["stages"] if row["status"] in ("committed", "skipped"))
        render.info(
            f"end of the journal: run {details['status']}, {committed}/{len(details['stages'])} stages "
            f"committed, {len(details['attempts'])} attempt(s)",
            render.report(),
        )
        for row in details.get("executors_lost") or []:
            render.info(f"attempt {row['attempt']}: {row['text']}", render.report())
        return 0
    stop = shown[-1]
    render.info(
        f"\nstopped after event {kept} ({timeline.address(stop)} at {stop['ts']}); the run as it stood then:",
        render.report(),
    )
    render.run_details(details)
    render.plan(
        plan,
        title=f"what resume --dry-run would have decided then (attempt {plan['attempt']}; "
        "outputs checked as they are now)",
    )
    return 0


def _stop(target: timeline.Until | None, shown: list[dict[str, Any]]) -> dict[str, Any] | None:
    if target is None:
        return None
    return {"given": target.text, "index": len(shown), "event": timeline.address(shown[-1]), "ts": shown[-1]["ts"]}


def _verify(run: Run, json_output: bool) -> int:
    from sparkrecover.journal.verify import verify_journal

    report = verify_journal(run)
    if json_output:
        render.emit_json(report.document())
    else:
        render.verify_report(report.document())
    return 0 if report.ok else EXIT_JOURNAL
