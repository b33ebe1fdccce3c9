"""All terminal output, through rich (NO_COLOR honoured), on two consoles (docs/cli-output.md):

- ``report()``, stdout: what a command exists to show (inspect's details and run list, replay's
  timeline, resume --dry-run's plan, every --json document), so ``| grep``, ``| less`` and
  ``> file`` get it;
- ``console()``, stderr: messages, warnings, errors and progress bars, and everything ``submit``
  and ``resume`` say, since the application's own stdout passes through theirs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparkrecover.core import humanize
from sparkrecover.kinds import FOREACH

if TYPE_CHECKING:
    from sparkrecover.launch.recovery import Outcome

_console: Console | None = None  # stderr
_report: Console | None = None  # stdout

DECISION_STYLE = {"skip": "green", "run": "yellow", "rerun": "magenta", "lost": "red", "continue": "cyan"}
STATUS_STYLE = {
    "succeeded": "green",
    "committed": "green",
    "skipped": "cyan",
    "running": "blue",
    "failed": "red",
    "crashed": "red",
    "lost": "red",
    "interrupted": "yellow",
    "unfinished": "yellow",
    "invalidated": "magenta",
    "unreadable": "red",
}
EVENT_STYLE = {
    "stage.committed": "green",
    "stage.failed": "red",
    "stage.skipped": "cyan",
    "stage.invalidated": "magenta",
    "stage.started": "blue",
    "attempt.started": "bold",
    "attempt.ended": "bold",
    "run.started": "bold",
    "journal.degraded": "yellow",
}


# The width of a pipe or a CI log: wide enough that no table is ever squeezed (tables take their
# natural width, never more) and no line wrapped; the reader's pager or log viewer does the rest.
UNBOUNDED_WIDTH = 100_000


# A stage name longer than this wraps inside its cell (whole, on more lines) rather than widen
# every table past a screen: implicit writes are named by call site and target path.
STAGE_COLUMN = 40


def _new_console(stderr: bool) -> Console:
    # COLUMNS, NO_COLOR and TERM are read from the environment by rich itself.
    made = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not made.is_terminal and not os.environ.get("COLUMNS"):
        # rich assumes 80 columns off a terminal: it would cut stage names and run ids into
        # pieces and inspect would drop columns. Nobody's screen is that narrow here.
        made.width = UNBOUNDED_WIDTH
    return made


def console() -> Console:
    """stderr: messages, warnings, errors, progress bars."""
    global _console
    if _console is None:
        _console = _new_console(stderr=True)
    return _console


def report() -> Console:
    """stdout: what the command exists to show."""
    global _report
    if _report is None:
        _report = _new_console(stderr=False)
    return _report


def reset() -> None:
    """Forget both consoles (tests redirect sys.stdout and sys.stderr between commands)."""
    global _console, _report
    _console = _report = None


# Messages are never wrapped by rich: one message stays one line in a log or a cron mail, for
# grep; a terminal wraps it on screen by itself.
def info(message: str, to: Console | None = None) -> None:
    (to or console()).print(Text(message), soft_wrap=True)


def warning(message: str, to: Console | None = None) -> None:
    (to or console()).print(Text.assemble(("warning: ", "yellow bold"), message), soft_wrap=True)


def error(message: str, to: Console | None = None) -> None:
    (to or console()).print(Text.assemble(("error: ", "red bold"), message), soft_wrap=True)


def emit_json(document: Any) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def stage_name(name: str, to: Console | None = None) -> str:
    """A stage name as a table shows it: on a terminal an implicit write's absolute target
    (``app.py:36#1 overwrite /home/me/jobs/out/daily``) is made relative to the working folder, or
    to ``~``, so that names fit a screen; on a pipe and in --json, whole (docs/cli-output.md)."""
    if not (to or report()).is_terminal:
        return name
    head, sep, target = name.rpartition(" ")
    if not sep or not target.startswith(os.sep):
        return name
    here = os.getcwd()
    if target == here or target.startswith(here + os.sep):
        return f"{head} {os.path.relpath(target, here)}"
    home = os.path.expanduser("~")
    if home != os.sep and target.startswith(home + os.sep):
        return f"{head} ~{target[len(home) :]}"
    return name


def command_summary(outcome: Outcome, json_output: bool) -> None:
    """How ``submit`` and ``resume`` end: the --json document on stdout, or a few lines on stderr
    after the application's output (docs/cli-output.md)."""
    from sparkrecover.core.views import summary

    if outcome.state is None:  # the run happened; only its summary cannot be read back
        warning(f"no summary: the journal of run {outcome.run.id} cannot be read back: {outcome.unreadable}")
        if json_output:
            emit_json({"run": outcome.run.id, "run_dir": outcome.run.dir, "exit_code": outcome.exit_code})
        return
    document = {
        **summary.command_summary(outcome.state, outcome.first_attempt, outcome.exit_code),
        "run_dir": outcome.run.dir,
    }
    if outcome.complete:
        document["complete"] = True
    if json_output:
        emit_json(document)
        return
    for line in summary.command_lines(document):
        info(line)


def _styled(value: str, styles: dict[str, str]) -> Text:
    return Text(value, style=styles.get(value, ""))


@contextlib.contextmanager
def file_progress(enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """A progress bar for verifying outputs, as a callback taking a number of files checked.

    Only on a terminal: on a pipe, in a CI log or with --json the callback is None and nothing
    is drawn. The bar is transient: once done it leaves no trace in the scrollback.
    """
    if not enabled or not console().is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("verifying outputs"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} files"),
        TimeElapsedColumn(),
        console=console(),
        transient=True,
    ) as progress:
        task = progress.add_task("verify", total=None)
        yield lambda files: progress.advance(task, files)


def plan(document: dict[str, Any], title: str | None = None, to: Console | None = None) -> None:
    """The plan, on stdout (resume --dry-run, replay) unless ``to`` says otherwise (the stderr of
    submit and resume, whose stdout is the application's)."""
    to = to or report()
    # The title is a line of its own: as a table title, rich would wrap it to the table's width.
    info(title or f"resume plan for run {document['run']}, attempt {document['attempt']}", to)
    table = Table()
    table.add_column("stage", max_width=STAGE_COLUMN, overflow="fold")
    table.add_column("decision")
    table.add_column("reason", overflow="fold")
    for row in document["stages"]:
        table.add_row(stage_name(row["stage"], to), _styled(row["decision"], DECISION_STYLE), row["reason"])
    if not document["stages"]:
        table.add_row("-", "-", "no stage was recorded: everything runs")
    to.print(table)
    # Shuffles outside any stage have no row to give their reason in: a line each.
    from sparkrecover.core.fold.kept_shuffles import NotKept

    for entry in document.get("shuffles_not_kept") or []:
        if entry["stage"] is None:
            info(f"map outputs outside any stage: {NotKept(**entry).describe()}", to)
    for entry in document.get("schemas") or []:  # replay's plan "then" has none
        info(f"reuse the schema of {entry['format']} {' '.join(entry['paths'])} ({entry['reason']})", to)
    from sparkrecover.core.views.recalled import action_lines

    for line in action_lines(document.get("actions") or []):
        info(line, to)


# -- inspect RUN ----------------------------------------------------------------------------------


def _attempt_note(row: dict[str, Any]) -> str:
    if row.get("started_by") == "launcher":  # the first such driver started the run: nothing restarted it
        return " (restarted by the launcher)" if row["attempt"] > 1 else " (started by the launcher)"
    return " (resumed)" if row["resumed"] else ""


def _failures(row: dict[str, Any]) -> str:
    parts = []
    if row["failed_spark_stages"]:
        parts.append(f"{row['failed_spark_stages']} stage{'s' if row['failed_spark_stages'] > 1 else ''}")
    if row["failed_tasks"]:
        parts.append(f"{row['failed_tasks']:,} task{'s' if row['failed_tasks'] > 1 else ''}")
    return ", ".join(parts) or "-"


def _notes(stages: list[dict[str, Any]], last_attempt: int) -> list[str]:
    """Why stages are as they are, grouped: fifty stages skipped for the same reason are one line."""
    grouped: dict[tuple[str, int, str], list[str]] = {}
    for row in stages:
        found = []
        if row["invalidated"]:
            found.append(("invalidated", row["invalidated"]["attempt"], row["invalidated"]["reason"]))
        if row["status"] == "failed":
            found.append(("failed", row["attempt"], row["error"]))
        elif row["skipped"] and row["skipped"]["attempt"] == last_attempt:
            found.append(("skipped", row["skipped"]["attempt"], row["skipped"]["reason"]))
        for what, attempt, reason in found:
            grouped.setdefault((what, attempt, humanize.first_line(reason, 500) or "no reason given"), []).append(
                stage_name(row["stage"])
            )
    notes = [
        f"{', '.join(names)}: {what} in attempt {attempt}: {reason}"
        for (what, attempt, reason), names in grouped.items()
    ]
    for row in stages:
        progress = row.get("partitions")
        if not progress or row["status"] == "running":
            continue
        name = stage_name(row["stage"])
        if "kept" in progress:
            origin = ", ".join(
                f"{count:,} in attempt {attempt}" for attempt, count in progress["by_attempt"].items() if count
            )
            notes.append(
                f"{name}: {progress['kept']:,}/{progress['total']:,} partitions kept from earlier attempts, "
                f"{progress['computed']:,} computed in attempt {row['attempt']} ({origin})"
            )
        elif progress["committed"]:
            # A foreach's partitions have no files: the journal alone says they finished.
            done, kept = (
                ("finished", "resume runs only the others")
                if row.get("kind") == FOREACH
                else ("committed", "resume keeps those whose files survive")
            )
            notes.append(
                f"{name}: {progress['committed']:,}/{progress['total']:,} partitions {done} before it stopped ({kept})"
            )
        else:
            done, whole = ("finished", "runs") if row.get("kind") == FOREACH else ("committed", "writes")
            notes.append(
                f"{name}: none of its {progress['total']:,} partitions {done} before it stopped "
                f"(resume {whole} it whole)"
            )
    return notes


def _exit_text(row: dict[str, Any]) -> str:
    text = "-" if row["exit_code"] is None else str(row["exit_code"])
    return text + (f" ({row['signal_name']})" if row.get("signal_name") else "")


_STAGE_COLUMNS: dict[
    str, tuple[Callable[[dict[str, Any]], str | Text], bool]
] = {  # column -> (value of a stage row, shown on a narrow terminal too)
    "stage": (lambda row: stage_name(row["stage"]), True),
    "status": (lambda row: _styled(row["status"], STATUS_STYLE), True),
    "attempt": (lambda row: str(row["attempt"] or "-"), True),
    "duration": (lambda row: humanize.duration(row["duration_s"]), True),
    "rows": (lambda row: humanize.count(row["rows"]), False),
    "written": (lambda row: humanize.size(row["bytes"]), True),
    "jobs": (lambda row: f"{row['spark_jobs']:,}", False),
    "spark stages": (lambda row: f"{row['spark_stages']:,}", False),
    "tasks": (lambda row: f"{row['tasks']:,}", True),
    "failures": (_failures, True),
}


def _stages_table(rows: list[dict[str, Any]], wide: bool) -> Table:
    columns = [name for name, (_, narrow) in _STAGE_COLUMNS.items() if wide or narrow]
    table = Table(title="stages", title_justify="left")
    for column in columns:
        stage_width = min(12, max([5, *(len(stage_name(row["stage"])) for row in rows)]))
        table.add_column(
            column,
            no_wrap=column != "stage",
            overflow="fold",
            min_width=stage_width if column == "stage" else None,
            max_width=STAGE_COLUMN if column == "stage" else None,
            justify="left" if column in ("stage", "status", "failures") else "right",
        )
    for row in rows:
        table.add_row(*(_STAGE_COLUMNS[column][0](row) for column in columns))
    if not rows:
        table.add_row(*(["-"] * (len(columns) - 1)), "no stage was reached")
    return table


def run_details(summary: dict[str, Any], hint: str | None = None) -> None:
    out = report()
    out.print(Text.assemble(("run ", "bold"), (summary["run"], "bold"), "  ", _styled(summary["status"], STATUS_STYLE)))
    out.print(f"app:        {summary.get('app') or '-'}")
    out.print(f"root:       {summary['root']}")
    out.print(f"journal:    {summary['run_dir']}")
    count = len(summary["attempts"])
    out.print(
        f"time:       {humanize.duration(summary['duration_s'])} from first to last event, "
        f"{humanize.duration(summary['busy_s'])} in {count} attempt{'s' if count != 1 else ''}"
    )
    if summary["stopped_in"]:
        out.print(
            Text.assemble(
                "stopped in: ",
                (", ".join(map(stage_name, summary["stopped_in"])), "bold"),
                " (started, never committed)",
            )
        )
    out.print(_stages_table(summary["stages"], wide=out.width >= 100))
    last = summary["attempts"][-1]["attempt"] if summary["attempts"] else 0
    for note in _notes(summary["stages"], last):
        out.print(Text("  " + note))
    attempts = Table(title="attempts", title_justify="left")
    for column in ("attempt", "outcome", "exit", "started (UTC)", "duration", "plan", "application id"):
        attempts.add_column(column, overflow="fold")
    for row in summary["attempts"]:
        attempts.add_row(
            str(row["attempt"]) + _attempt_note(row),
            _styled(row["outcome"], STATUS_STYLE),
            _exit_text(row),
            humanize.timestamp(row["started"]),
            humanize.duration(row["duration_s"]),
            humanize.tally(row["plan"]) or "-",
            row["app_id"] or "-",
        )
    out.print(attempts)
    # The keep folder is gone once the run succeeded (or a resume started from scratch): what the
    # journal says was kept is history then, not files a resume could use.
    removed = summary.get("shuffle_bytes") is None or summary["status"] == "succeeded"
    for row in summary.get("shuffles") or []:
        reused = ", ".join(f"{n} reused by attempt {a}" for a, n in (row.get("reused") or {}).items() if n)
        kept = f"{row['kept']}/{row['maps'] or '?'} map outputs " + ("were kept" if removed else "kept")
        out.print(
            Text(
                f"shuffle {row['shuffle'][:12]}  {kept}"
                + (f" ({reused})" if reused else "")
                + (", since removed" if removed and row["kept"] else "")
                + (f"  in {row['stage']}" if row.get("stage") else "")
            )
        )
    if summary["status"] == "succeeded":
        # Nothing is kept for a run that succeeded: its keep folder was removed, or never held a
        # map output. Files still there (a removal that failed) are said as what they are.
        if summary.get("shuffle_bytes"):
            out.print(
                Text(
                    f"shuffle files left after the run succeeded: {humanize.size(summary['shuffle_bytes'])} in "
                    f"{summary.get('shuffle_folder')} (nothing reads them: they may be deleted)"
                ),
                soft_wrap=True,
            )
    elif not removed:
        rows = summary.get("shuffles") or []
        copying = sum(row.get("copy_seconds") or 0 for row in rows)
        on_tasks = sum(row.get("keep_seconds") or 0 for row in rows)
        cost = f"; keeping took {_brief(on_tasks)} of map tasks' time" if on_tasks else ""
        cost += f" and {_brief(copying)} of background copying" if copying else ""
        out.print(
            Text(
                f"kept shuffle files: {humanize.size(summary['shuffle_bytes'])} in {summary.get('shuffle_folder')} "
                f"(removed when the run succeeds){cost}"
            ),
            soft_wrap=True,
        )
    for row in summary.get("shuffles_unsupported") or []:
        out.print(Text(f"  map outputs not kept ({_refused_where(row)}): {row['reason']}", style="dim"))
    for row in summary.get("executors_lost") or []:
        out.print(Text(f"attempt {row['attempt']}: {row['text']}"), soft_wrap=True)
    _actions(out, summary.get("actions") or {}, removed=summary["status"] == "succeeded")
    # An error a later attempt got past is history: replay shows it.
    if summary.get("last_error") and summary["status"] != "succeeded":
        out.print(Text.assemble(("last error: ", "red"), humanize.first_line(summary["last_error"], 500)))
    if summary.get("journal_degraded"):
        warning(f"the journal's storage failed {summary['journal_degraded']} time(s) during this run", out)
    if hint:
        out.print(Text(hint, style="dim"), soft_wrap=True)


def _actions(out: Console, actions: dict[str, Any], removed: bool) -> None:
    """What inspect says of recorded and replayed actions (docs/replay.md)."""
    if not actions.get("recorded"):
        return
    from sparkrecover.core.views.recalled import actions_line

    out.print(Text(actions_line(actions, removed)), soft_wrap=True)
    for row in actions["ran_again"][:10]:
        out.print(Text(f"  ran again in attempt {row['attempt']}: {row['key']}: {row['reason']}", style="dim"))
    for row in actions["not_kept"][:10]:
        out.print(Text(f"  not kept in attempt {row['attempt']}: {row['key']}: {row['reason']}", style="dim"))


def _brief(seconds: float) -> str:
    """A short time as people read it: ``12 ms``, ``3.4s``."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else humanize.duration(seconds)


def _refused_where(row: dict[str, Any]) -> str:
    """``attempt 1, Spark shuffles 3, 5 in stage x``: which shuffles a reason was given for."""
    ids = row.get("spark_shuffles") or []
    where = f"attempt {row['attempt']}"
    if ids:
        shown = ", ".join(map(str, ids[:10])) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        where += f", Spark shuffle{'s' if len(ids) > 1 else ''} {shown}"
    return where + (f" in {stage_name(row['stage'])}" if row.get("stage") else "")


def runs_table(rows: list[dict[str, Any]], root: str) -> None:
    if not rows:
        info(f"no runs under {root}", report())
        return
    table = Table(title=f"runs under {root}", title_justify="left")
    for column in ("run", "app", "status", "attempts", "stages", "last activity (UTC)", "duration"):
        table.add_column(column, overflow="fold")
    problems = []
    for row in rows:
        if row["status"] == "unreadable":
            table.add_row(row["run"], "-", _styled("unreadable", STATUS_STYLE), "-", "-", "-", "-")
            problems.append(f"  {row['run']}: {humanize.first_line(row['error'], 500)}")
            continue
        app = (row.get("app") or "-").rsplit("/", 1)[-1]
        table.add_row(
            row["run"],
            app,
            _styled(row["status"], STATUS_STYLE),
            str(row["attempts"]),
            f"{row['stages_committed']}/{row['stages']}",
            humanize.timestamp(row["last_activity"]),
            humanize.duration(row["duration_s"]),
        )
    report().print(table)
    for problem in problems:  # whole lines, not folded into a cell: they name a file and a line
        report().print(Text(problem), soft_wrap=True)


# -- replay ---------------------------------------------------------------------------------------


def _event_style(kind: str) -> str:
    return EVENT_STYLE.get(kind, "dim" if kind.startswith("spark.") else "")


def timeline(
    records: Iterable[dict[str, Any]],
    facts: Callable[[dict[str, Any]], str],
    *,
    stage_width: int,
    numbered: bool = True,
    header: bool = True,
    day: str | None = None,
) -> str | None:
    """One line per event; a date line whenever the (UTC) day changes (``day`` is the day of the
    lines already printed; the last day is returned). On a terminal long lines are cut at its
    width; on a pipe they are printed whole, for grep."""
    out = report()
    # Without colour there is nothing for rich to do but slow a million lines down: write them.
    plain = out.no_color or out.color_system is None
    lines: list[Any] = []
    if header:
        title = (
            f"{'#':>6}  " if numbered else ""
        ) + f"{'time (UTC)':<12}  att writer  {'event':<22}  {'stage':<{stage_width}}  fact"
        lines.append(title if plain else Text(title, style="bold"))
    for index, record in enumerate(records, start=1):
        if record["ts"][:10] != day:
            day = record["ts"][:10]
            lines.append(f"── {day} ──" if plain else Text(f"── {day} ──", style="dim"))
        head = (
            f"{index:>6}  " if numbered else ""
        ) + f"{record['ts'][11:23]}  {record['attempt']:>3} {record['writer']:<6}  "
        tail = f"  {stage_name(record.get('stage') or '-', out):<{stage_width}}  {facts(record)}"
        kind = f"{record['type']:<22}"
        lines.append(head + kind + tail if plain else Text.assemble(head, (kind, _event_style(record["type"])), tail))
        if len(lines) >= 1000:  # one write per chunk, not per line
            _print_lines(lines, plain)
            lines = []
    _print_lines(lines, plain)
    return day


def _print_lines(lines: list[Any], plain: bool) -> None:
    if not lines:
        return
    out = report()
    if plain and not out.is_terminal:
        out.file.write("\n".join(lines) + "\n")
        out.file.flush()
        return
    text = Text("\n").join(Text(line) if isinstance(line, str) else line for line in lines)
    if out.is_terminal:
        out.print(text, no_wrap=True, overflow="ellipsis", crop=True)
    else:
        out.print(text, soft_wrap=True)


def verify_report(document: dict[str, Any]) -> None:
    streams = ", ".join(f"{s['attempt']}/{s['writer']} {s['events']:,}" for s in document["streams"])
    out = report()
    info(
        f"journal of run {document['run']} at {document['run_dir']}: {document['segments']} segment(s), "
        f"{document['events']:,} events" + (f" ({streams})" if streams else ""),
        out,
    )
    for finding in document["warnings"]:
        warning(f"{finding['where']}: {finding['message']}", out)
    for finding in document["problems"]:
        error(f"{finding['where']}: {finding['message']}", out)
    if document["omitted"]:
        warning(f"{document['omitted']} more finding(s) not shown", out)
    problems, warnings = len(document["problems"]), len(document["warnings"])
    verdict = Text("journal corrupt", style="red bold") if problems else Text("journal OK", style="green bold")
    verdict.append(
        f": {problems} problem{'s' if problems != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}",
        style="",
    )
    out.print(verdict)
