"""``sparkrecover report``: one self-contained HTML page of a run (docs/report.md).

The data comes from ``core/views/report_data.py`` (the same fold as ``inspect`` and ``replay``), fed by
``planning/reading.py: load_report``; this module adds the lease and the plan, and lays the page out
with the Jinja2 templates in ``cli/templates/`` (autoescaped: a stage name is text, never markup). No CDN, no script, no
network: the page is one file to keep, mail or attach to a ticket.
"""

from __future__ import annotations

import os
import pathlib
import sys
from datetime import datetime, timezone

from sparkrecover.cli import render
from sparkrecover.core import humanize
from sparkrecover.core.views import report_data, timeline
from sparkrecover.core.views.grids import COMPUTED, KEPT, UNFINISHED
from sparkrecover.errors import EXIT_JOURNAL, SparkRecoverError, UsageError
from sparkrecover.planning import reading
from sparkrecover.planning.storage_evidence import StorageEvidence
from sparkrecover.rundir import keep, runs, storage

STDOUT = "-"


def default_output(run_id: str) -> str:
    return f"{run_id}-report.html"


def command_for(run_id: str, root: str | None) -> str:
    """The command line that writes the report of a run, as submit and resume print it."""
    return f"sparkrecover report {run_id}" + ("" if root is None else f" --root {root}")


def run(*, run: str, root: str | None, output: str | None, open_browser: bool) -> int:
    if output == STDOUT and open_browser:
        raise UsageError("--open needs a file: give -o FILE (or none), not -o -")
    resolved = runs.resolve_run(run, storage.resolve_root(root))
    collected, damage = reading.load_report(resolved, render.warning)
    state = collected.state
    live = reading.live_lease(resolved.dir) is not None
    plan, problem = None, None
    if not damage and report_data.wants_plan(state.status(lease_live=live)):
        try:
            with render.file_progress(enabled=output != STDOUT) as progress:
                plan = timeline.plan_at(state, StorageEvidence(resolved.dir, "size", progress))
        except SparkRecoverError as error:  # the page still shows what happened
            problem = f"resume could not plan: {error}"
    page = collected.report(resolved.dir, lease_live=live, plan=plan, plan_problem=problem, damage=damage)
    html = render_html(page, root)
    if output == STDOUT:
        sys.stdout.write(html)
        sys.stdout.flush()
    else:
        path = os.path.abspath(output or default_output(resolved.id))
        _write(path, html)
        render.info(f"report of run {resolved.id} ({page.status}) written to {path}")
        if open_browser:
            _open(path)
    if damage:
        render.warning(f"the journal of run {resolved.id} is damaged; the report shows what could be read: {damage[0]}")
        return EXIT_JOURNAL
    return 0


def _write(path: str, html: str) -> None:
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise UsageError(f"-o {path}: no folder {folder}")
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(html)
        os.replace(temporary, path)
    except OSError as error:
        raise UsageError(f"-o {path}: cannot write the report: {error.strerror or error}") from None


def _open(path: str) -> None:
    import webbrowser

    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        render.info("no web browser found here: open the file yourself")
        return
    if not browser.open(pathlib.Path(path).as_uri()):
        render.info("the web browser did not start: open the file yourself")


# -- the page ------------------------------------------------------------------------------------

GRID_LETTER = {KEPT: "K", COMPUTED: "C", UNFINISHED: "·"}


def _percent(seconds: float, scale: float) -> float:
    return round(100.0 * max(seconds, 0.0) / scale, 3) if scale > 0 else 0.0


def _ticks(scale: float) -> list[tuple[float, str]]:
    """Four or five round times along the axis of the timeline."""
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)
    step = next((s for s in steps if scale / s <= 5), steps[-1])
    return [(_percent(t, scale), humanize.duration(float(t))) for t in range(0, int(scale) + 1, step)]


def _when(ts: str | None) -> str:
    return f"{humanize.timestamp(ts)} UTC" if ts else "-"


def render_html(page: report_data.Report, root: str | None = None) -> str:
    from importlib import resources

    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: (resources.files("sparkrecover.cli") / "templates" / name).read_text("utf-8")
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        duration=humanize.duration,
        size=humanize.size,
        count=humanize.count,
        when=_when,
        line=humanize.first_line,
        pct=lambda seconds: _percent(seconds, page.scale_s),
    )
    template = environment.get_template("report.html.j2")
    return template.render(
        page=page,
        outcomes=report_data.OUTCOMES,
        ticks=_ticks(page.scale_s),
        letter=GRID_LETTER,
        commands=_commands(page, root),
        keep_folder=keep.folder(page.run_dir),
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def _commands(page: report_data.Report, root: str | None) -> list[str]:
    where = "" if root is None else f" --root {root}"
    run = page.run_id
    if page.status in ("succeeded", "running"):
        return [f"sparkrecover inspect {run}{where}"]
    return [f"sparkrecover resume {run}{where}", f"sparkrecover resume {run}{where} --dry-run"]
