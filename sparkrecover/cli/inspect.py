"""``sparkrecover inspect``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sparkrecover.cli import render
from sparkrecover.core.views import summary
from sparkrecover.errors import RunNotFoundError, SparkRecoverError
from sparkrecover.planning import reading
from sparkrecover.rundir import keep, runs, storage

if TYPE_CHECKING:
    from sparkrecover.core.fold.runstate import RunState


def run(*, run: str | None, root: str | None, json_output: bool, follow: bool = False) -> int:
    root_url = storage.resolve_root(root)
    if run is None:
        if follow:
            from sparkrecover.errors import UsageError

            raise UsageError("--follow needs a RUN to follow")
        chosen = root is not None or bool(os.environ.get(storage.ROOT_ENV))
        if chosen and storage.is_local(root_url) and not os.path.isdir(root_url):
            # A root somebody named that is not there is a typo or the wrong machine, not an empty
            # list: exit 5 as for an unknown run (docs/decisions/0024-cli-rough-edges.md). The
            # default root may be absent.
            raise RunNotFoundError(f"no such root {root_url}: no run was ever started there")
        items: list[tuple[str, str, RunState | None, str | None, bool]] = []
        for listed in runs.list_runs(root_url):
            try:
                state = reading.load_state(listed)
                items.append((listed.id, listed.dir, state, None, reading.live_lease(listed.dir) is not None))
            except SparkRecoverError as problem:
                items.append((listed.id, listed.dir, None, str(problem), False))
        rows = summary.runs_overview(items)
        if json_output:
            render.emit_json({"root": root_url, "runs": rows})
        else:
            render.runs_table(rows, root_url)
        return 0
    resolved = runs.resolve_run(run, root_url)
    if follow:
        from sparkrecover.cli.follow import until_ended

        details = until_ended(resolved, quiet=json_output)
    else:
        state = reading.load_state(resolved, render.warning)
        lease = reading.live_lease(resolved.dir)
        details = summary.run_summary(state, resolved.dir, lease_live=lease is not None, lease=lease)
    details["shuffle_bytes"] = keep.disk_usage(resolved.dir)  # what kept map outputs hold now, on any store
    details["shuffle_folder"] = keep.folder(resolved.dir)
    if json_output:
        render.emit_json(details)
    else:
        render.run_details(details, hint=resume_hint(details, run, root))
    return 0


def resume_hint(details: dict, run: str, root: str | None) -> str | None:
    """Tired readers want the next command, not a manual."""
    if details["status"] in ("running", "succeeded", "unknown"):
        return None
    where = "" if root is None else f" --root {root}"
    return f"what resume would do now: sparkrecover resume {run}{where} --dry-run"
