"""``inspect RUN --follow``: a live view on a terminal, a line per event on a pipe or in a CI log.

Both end when the run ends (see ``sparkrecover.core.views.watch``); ``inspect`` then prints the run's
details as it would for a finished run.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.spinner import Spinner
from rich.table import Column
from rich.text import Text

from sparkrecover.cli import render
from sparkrecover.core import humanize
from sparkrecover.core.fold import kept_shuffles
from sparkrecover.core.fold.runstate import STARTED, RunState, StageState
from sparkrecover.core.views import summary, timeline, watch
from sparkrecover.journal import events as ev
from sparkrecover.planning import reading
from sparkrecover.rundir.runs import Run

STAGE_WIDTH = 16  # the least a stage name gets; a wide terminal gives it more (_name_width)
# What the other columns of the live view need at least: icon, bar, state and a useful detail.
OTHER_COLUMNS = 1 + 20 + 11 + 30 + 8
ICONS = {
    "committed": ("✓", "green"),
    "succeeded": ("✓", "green"),
    "skipped": ("↷", "cyan"),
    "failed": ("✗", "red"),
    "crashed": ("✗", "red"),
    "interrupted": ("✗", "yellow"),
    "lost": ("!", "red"),
    "invalidated": ("↺", "magenta"),
    "unfinished": ("·", "yellow"),
}


def until_ended(run: Run, *, quiet: bool) -> dict[str, Any]:
    """Follow the run until it ends; returns what ``inspect`` shows of it then."""
    updates = watch.follow(reading.WatchedRun(run.dir), run.id)
    if quiet:
        last = _drain(updates)
    elif render.report().is_terminal:
        last = _live(updates, run.id)
    else:
        last = _lines(updates, run.id)
    for message in last.warnings:
        render.warning(message)
    if not quiet:
        render.info(f"run {run.id}: {last.ended}", render.report())
    return summary.run_summary(last.state, run.dir, lease_live=False)


def _drain(updates: Iterator[watch.Update]) -> watch.Update:
    for update in updates:
        if update.ended:
            return update
    raise AssertionError("follow() always ends with an update that says why")


def _worth_a_line(record: dict[str, Any]) -> bool:
    """In a log, Spark's own jobs and stages are noise unless something failed."""
    if not record["type"].startswith("spark."):
        return True
    return bool(
        record.get("failure")
        or record.get("failed_tasks")
        or record.get("succeeded") is False
        or record["type"] == ev.SPARK_EXECUTOR_REMOVED
    )


def _lines(updates: Iterator[watch.Update], run_id: str) -> watch.Update:
    day = None
    shown: dict[str, int] = {}  # per shuffle, the kept map outputs last shown
    for number, update in enumerate(updates):
        if number == 0:  # not before: the first poll is what tells an unknown run
            render.info(f"following run {run_id}; this ends with the run (Ctrl-C stops following, not the run)")
        worth = [r for r in update.new if _worth_a_line(r)]
        day = render.timeline(
            timeline.shuffle_milestones(worth, update.state.shuffles, shown),
            timeline.fact,
            stage_width=STAGE_WIDTH,
            numbered=False,
            header=False,
            day=day,
        )
        if update.ended:
            return update
    raise AssertionError("follow() always ends with an update that says why")


# -- the live view ----------------------------------------------------------------------------------


class _Icon(ProgressColumn):
    """A spinner while a stage runs, a mark once it is done."""

    def __init__(self) -> None:
        super().__init__()
        self._spinner = Spinner("dots", style="blue")

    def render(self, task: Task) -> Any:
        state = task.fields.get("state", "")
        if state == "running":
            return self._spinner.render(task.get_time())
        icon, style = ICONS.get(state, (" ", ""))
        return Text(icon, style=style)


def _seconds_since(ts: str | None) -> float | None:
    if not ts:
        return None
    then = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return max(0.0, (datetime.now(timezone.utc) - then).total_seconds())


def _stage_view(stage: StageState, state: RunState, live: bool) -> dict[str, Any]:
    last = state.last_attempt.number if state.last_attempt else 0
    running = live and stage.status == STARTED and stage.attempt == last
    status = "running" if running else summary.stage_status(stage, last)
    if running:
        took = _seconds_since((stage.started or {}).get("ts"))
    else:
        took = stage.duration_s
    detail = [humanize.duration(took)]
    if stage.spark_jobs:
        detail.append(f"{stage.spark_jobs:,} Spark job{'s' if stage.spark_jobs > 1 else ''}")
    if stage.tasks:
        detail.append(f"{stage.tasks:,} tasks" + (f" ({stage.failed_tasks:,} failed)" if stage.failed_tasks else ""))
    if stage.rows is not None:
        detail.append(f"{stage.rows:,} rows")
    kept, maps = kept_shuffles.progress(state.shuffles, stage.name)
    if maps:
        detail.append(f"{kept:,}/{maps:,} shuffle map outputs kept")
    progress = stage.partitions
    if progress and progress["total"]:
        # Inside a write: the bar counts its partitions (kept ones from earlier attempts included).
        detail.append(f"{progress['committed']:,}/{progress['total']:,} partitions")
        return {
            "state": status,
            "detail": "  ".join(detail),
            "total": progress["total"],
            "completed": progress["committed"],
        }
    done = status in ("committed", "skipped", "lost")
    return {
        "state": status,
        "detail": "  ".join(detail),
        "total": None if running else 1,
        "completed": 1 if done else 0,
    }


def _headline(state: RunState) -> str:
    """How far the run is. The stages known are those any attempt recorded so far (a resumed
    attempt knows its whole pipeline from the earlier ones; a first attempt only what it reached)."""
    last = state.last_attempt
    if last is None:
        return "waiting for the first events"
    done = sum(1 for s in state.stages.values() if s.status == "committed")
    known = len(state.stages)
    if last.number == 1 and not last.ended:
        return f"attempt 1, {done} stage{'s' if done != 1 else ''} done of {known} reached so far"
    return f"attempt {last.number}, {done}/{known} stages done"


def _name_width(names: list[str], columns: int) -> int:
    """Stage names whole when the terminal has room, never less than STAGE_WIDTH."""
    longest = max([STAGE_WIDTH, *(len(name) for name in names)])
    return max(STAGE_WIDTH, min(longest, columns - OTHER_COLUMNS))


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _live(updates: Iterator[watch.Update], run_id: str) -> watch.Update:
    # Fixed-width columns first, so a narrow terminal shortens the details, never the bars.
    progress = Progress(
        _Icon(),
        TextColumn("{task.description}", table_column=Column(no_wrap=True)),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[state]:<11}", table_column=Column(no_wrap=True)),
        TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
        console=render.report(),
        transient=False,
        expand=True,
    )
    rows: dict[str, TaskID] = {}
    columns = render.report().width
    with progress:
        overall = progress.add_task(
            f"run {_cut(run_id, STAGE_WIDTH):<{STAGE_WIDTH + 2}}", total=None, state="running", detail=""
        )
        width = STAGE_WIDTH
        for update in updates:
            state, live = update.state, not update.ended
            shown = {name: render.stage_name(name) for name in state.stages}
            wider = _name_width([run_id, *shown.values()], columns)
            if wider != width:  # a longer name arrived: every row and the run's line line up again
                width = wider
                progress.update(overall, description=f"run {_cut(run_id, width - 2):<{width}}")
                for name, task in rows.items():
                    progress.update(task, description=f"  {_cut(shown[name], width):<{width}}")
            for name, stage in state.stages.items():
                view = _stage_view(stage, state, live)
                if name not in rows:
                    rows[name] = progress.add_task(f"  {_cut(shown[name], width):<{width}}", **view)
                else:
                    progress.update(rows[name], **view)
            finished = sum(1 for s in state.stages.values() if s.status == "committed")
            progress.update(
                overall,
                total=max(len(state.stages), 1),
                completed=finished,
                state="running" if live else state.status(),
                detail=_headline(state),
            )
            if update.ended:
                return update
    raise AssertionError("follow() always ends with an update that says why")
