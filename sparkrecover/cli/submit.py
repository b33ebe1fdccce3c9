"""``sparkrecover submit``."""
from __future__ import annotations

from sparkrecover.cli import render
from sparkrecover.launch import recovery
from sparkrecover.rundir import runs, storage


def run(*, root: str | None, run_id: str | None, spark_submit: str | None, flush_interval: float,
        buffer_size: int, max_attempts: int, checksums: bool, json_output: bool, args: list[str],
        checkpoint_root: str | None = None) -> int:
    root_url = storage.resolve_root(root)
    run_id, code = recovery.submit(root_url, run_id, args, spark_submit=spark_submit,
                                   flush_interval=flush_interval, buffer_size=buffer_size, checksums=checksums,
                                   max_attempts=max_attempts, checkpoint_root=checkpoint_root,
                                   notify=render.info, warn=render.warning,
                                   show_plan=lambda plan: None if json_output else render.plan(plan.dry_run()))
    if json_output:
        render.emit_json({"run": run_id, "run_dir": runs.run_dir_of(root_url, run_id), "exit_code": code})
    elif code != 0:
        render.warning(f"run {run_id} ended with exit code {code}; to continue where it stopped: "
                       f"sparkrecover resume {run_id}" + ("" if root is None else f" --root {root}"))
    return code
