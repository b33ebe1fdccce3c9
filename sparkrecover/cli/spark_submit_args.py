"""``sparkrecover spark-submit-args``."""

from __future__ import annotations

import shlex

from sparkrecover.cli import render
from sparkrecover.errors import UsageError
from sparkrecover.launch import handoff
from sparkrecover.launch.shuffles import MODES
from sparkrecover.rundir import storage


def run(
    *,
    root: str | None,
    run_id: str,
    spark_submit: str | None,
    flush_interval: float,
    buffer_size: int,
    checksums: bool,
    checkpoint_root: str | None,
    keep_shuffles: str,
    json_output: bool,
    args: list[str],
) -> int:
    if keep_shuffles not in MODES:
        raise UsageError(f"--keep-shuffles {keep_shuffles}: expected one of {', '.join(MODES)}")
    handed = handoff.handoff(
        storage.resolve_root(root),
        run_id,
        args,
        spark_submit=spark_submit,
        flush_interval=flush_interval,
        buffer_size=buffer_size,
        checksums=checksums,
        checkpoint_root=checkpoint_root,
        keep_shuffles=keep_shuffles,
        notify=render.info,
    )
    if json_output:
        render.emit_json(handed.document())
    else:
        render.info(shlex.join(handed.argv), render.report())
    return 0
