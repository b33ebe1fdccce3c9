"""``sparkrecover spark-submit-args``."""

from __future__ import annotations

import shlex

from sparkrecover.cli import render
from sparkrecover.launch import handoff
from sparkrecover.launch.options import RunOptions
from sparkrecover.rundir import storage


def run(options: RunOptions, *, run_id: str, args: list[str]) -> int:
    handed = handoff.handoff(storage.resolve_root(options.root), run_id, args, options, notify=render.info)
    if options.json_output:
        render.emit_json(handed.document())
    else:
        render.info(shlex.join(handed.argv), render.report())
    return 0
