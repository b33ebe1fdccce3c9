"""All terminal output: human text on stderr through rich (NO_COLOR honoured), JSON on stdout."""
from __future__ import annotations

import sys
from typing import Any, Optional

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

_console: Optional[Console] = None

DECISION_STYLE = {"skip": "green", "run": "yellow", "rerun": "magenta", "lost": "red"}
STATUS_STYLE = {"succeeded": "green", "committed": "green", "skipped": "cyan", "running": "blue",
                "failed": "red", "crashed": "red", "lost": "red", "interrupted": "yellow",
                "unfinished": "yellow"}


def console() -> Console:
    global _console
    if _console is None:
        _console = Console(stderr=True, highlight=False, soft_wrap=False)
    return _console


# Messages are never wrapped at the console width: an error is one line, even in a cron mail.
def info(message: str) -> None:
    console().print(Text(message), soft_wrap=True)


def warning(message: str) -> None:
    console().print(Text.assemble(("warning: ", "yellow bold"), message), soft_wrap=True)


def error(message: str) -> None:
    console().print(Text.assemble(("error: ", "red bold"), message), soft_wrap=True)


def emit_json(document: Any) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


def _styled(value: str, styles: dict[str, str]) -> Text:
    return Text(value, style=styles.get(value, ""))


def _size(value: Optional[int]) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def plan(document: dict[str, Any]) -> None:
    table = Table(title=f"resume plan for run {document['run']}, attempt {document['attempt']}",
                  title_justify="left")
    table.add_column("stage")
    table.add_column("decision")
    table.add_column("reason", overflow="fold")
    for row in document["stages"]:
        table.add_row(row["stage"], _styled(row["decision"], DECISION_STYLE), row["reason"])
    if not document["stages"]:
        table.add_row("-", "-", "no stage was recorded: everything runs")
    console().print(table)


def run_details(summary: dict[str, Any]) -> None:
    out = console()
    out.print(Text.assemble(("run ", "bold"), (summary["run"], "bold"), "  ",
                            _styled(summary["status"], STATUS_STYLE)))
    out.print(f"app:       {summary.get('app') or '-'}")
    out.print(f"journal:   {summary['run_dir']}")
    out.print(f"time:      {_duration(summary['duration_s'])} over {len(summary['attempts'])} attempt(s)")
    stages = Table(title="stages", title_justify="left")
    for column in ("stage", "status", "attempt", "duration", "output", "jobs", "tasks"):
        stages.add_column(column, no_wrap=column != "stage", overflow="fold")
    notes = []
    for row in summary["stages"]:
        tasks = f"{row['tasks']}" + (f" ({row['failed_tasks']} failed)" if row["failed_tasks"] else "")
        stages.add_row(row["stage"], _styled(row["status"], STATUS_STYLE), str(row["attempt"] or "-"),
                       _duration(row["duration_s"]), _size(row["bytes"]), str(row["spark_jobs"]), tasks)
        if row["reason"] and row["status"] != "skipped":
            notes.append(f"  {row['stage']}: {row['reason'].splitlines()[0][:300]}")
    out.print(stages)
    for note in notes:
        out.print(Text(note))
    attempts = Table(title="attempts", title_justify="left")
    for column in ("attempt", "outcome", "exit", "duration", "application id"):
        attempts.add_column(column)
    for row in summary["attempts"]:
        exit_text = "-" if row["exit_code"] is None else str(row["exit_code"])
        if row["signal"]:
            exit_text += f" (signal {row['signal']})"
        attempts.add_row(str(row["attempt"]) + (" (resumed)" if row["resumed"] else ""),
                         _styled(row["outcome"], STATUS_STYLE), exit_text, _duration(row["duration_s"]),
                         row["app_id"] or "-")
    out.print(attempts)
    if summary.get("last_error"):
        out.print(Text.assemble(("last error: ", "red"), summary["last_error"].splitlines()[0][:500]))
    if summary.get("journal_degraded"):
        warning(f"the journal's storage failed {summary['journal_degraded']} time(s) during this run")


def runs_table(rows: list[dict[str, Any]], root: str) -> None:
    if not rows:
        info(f"no runs under {root}")
        return
    table = Table(title=f"runs under {root}", title_justify="left")
    for column in ("run", "app", "status", "attempts", "last activity", "duration"):
        table.add_column(column, overflow="fold")
    for row in rows:
        if row["status"] == "unreadable":
            table.add_row(row["run"], "-", _styled("unreadable", STATUS_STYLE), "-", "-", row["error"])
            continue
        app = (row.get("app") or "-").rsplit("/", 1)[-1]
        table.add_row(row["run"], app, _styled(row["status"], STATUS_STYLE), str(row["attempts"]),
                      row["last_activity"] or "-", _duration(row["duration_s"]))
    console().print(table)
