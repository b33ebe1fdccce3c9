"""``sparkrecover resume``."""
from __future__ import annotations

from typing import Optional

from sparkrecover import recovery, render, runs, storage
from sparkrecover.errors import UsageError
from sparkrecover.manifests import VERIFY_LEVELS


def run(*, run: str, root: Optional[str], dry_run: bool, rerun: tuple[str, ...], from_scratch: bool,
        verify: str, spark_submit: Optional[str], json_output: bool, extra: list[str]) -> int:
    if verify not in VERIFY_LEVELS:
        raise UsageError(f"--verify {verify}: expected one of {', '.join(VERIFY_LEVELS)}")
    run_dir, run_id = runs.resolve_run(run, storage.resolve_root(root))
    plan = recovery.plan_resume(run_dir, run_id, verify_level=verify, rerun=rerun, from_scratch=from_scratch,
                                warn=render.warning)
    if plan.state.succeeded and not (rerun or from_scratch):
        if json_output:
            render.emit_json({**plan.dry_run(), "complete": True})
        render.info(f"run {run_id} already completed successfully; nothing to resume "
                    "(use --rerun STAGE or --from-scratch to run stages again)")
        return 0
    if dry_run:
        if json_output:
            render.emit_json(plan.dry_run())
        else:
            render.plan(plan.dry_run())
        return 0
    if not json_output:
        render.plan(plan.dry_run())
    code = recovery.launch_resume(plan, extra, spark_submit=spark_submit, notify=render.info,
                                  warn=render.warning)
    if json_output:
        render.emit_json({**plan.dry_run(), "exit_code": code})
    return code
