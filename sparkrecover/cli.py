"""The command line: builds the argument tree and dispatches; each command lives in commands/.

Heavy modules (pyspark, fsspec backends, the planner) are imported inside the commands so that
``sparkrecover --help`` starts fast.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from typing import List, Optional

import typer

from sparkrecover import __version__
from sparkrecover.errors import EXIT_INTERRUPTED, EXIT_USAGE, SparkRecoverError

EXIT_INTERNAL = 70  # a bug in sparkrecover: the traceback goes to a log file

app = typer.Typer(
    name="sparkrecover",
    help="Make long PySpark batch jobs survive driver crashes: journal their progress, resume where they died.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

ROOT_HELP = "Where runs live (any fsspec URL). Default: $SPARKRECOVER_ROOT, else ./.sparkrecover."
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


def _version(value: bool) -> None:
    if value:
        print(f"sparkrecover {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Make long PySpark batch jobs survive driver crashes."""


@app.command(context_settings=PASS_THROUGH)
def submit(
    ctx: typer.Context,
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name the run (default: time, app and a random suffix)."),
    spark_submit: Optional[str] = typer.Option(None, "--spark-submit", help="The spark-submit to use (default: $SPARK_HOME/bin, PATH, then pyspark's)."),
    flush_interval: float = typer.Option(1.0, "--flush-interval", min=0.0, help="Seconds between journal flushes."),
    buffer_size: int = typer.Option(1 << 20, "--buffer-size", min=1, help="Journal write buffer in bytes; a full buffer is flushed."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Run a PySpark application through spark-submit with its progress journaled.

    Everything after the options above (or after --) goes to spark-submit untouched:

        sparkrecover submit --run-id nightly -- --master 'local[*]' etl.py --day 2026-11-21
    """
    from sparkrecover.commands import submit as command

    raise typer.Exit(command.run(root=root, run_id=run_id, spark_submit=spark_submit, flush_interval=flush_interval,
                                 buffer_size=buffer_size, json_output=json_output, args=list(ctx.args)))


@app.command(context_settings={"allow_extra_args": True})
def resume(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="A run id under the root, or the URL of a run directory."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and launch nothing."),
    rerun: List[str] = typer.Option([], "--rerun", help="Run this stage again even if it is intact (repeatable)."),
    from_scratch: bool = typer.Option(False, "--from-scratch", help="Run every stage again."),
    verify: str = typer.Option("size", "--verify", help="How to check committed outputs: size (files, sizes, _SUCCESS)."),
    spark_submit: Optional[str] = typer.Option(None, "--spark-submit", help="The spark-submit to use (default: the recorded one)."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Relaunch a run, skipping the stages that finished and whose outputs survive.

    spark-submit options after -- are merged over the recorded ones:

        sparkrecover resume nightly -- --driver-memory 8g
    """
    from sparkrecover.commands import resume as command

    raise typer.Exit(command.run(run=run, root=root, dry_run=dry_run, rerun=tuple(rerun), from_scratch=from_scratch,
                                 verify=verify, spark_submit=spark_submit, json_output=json_output,
                                 extra=list(ctx.args)))


@app.command()
def inspect(
    run: Optional[str] = typer.Argument(None, help="A run id or run directory URL; without it, list the runs."),
    root: Optional[str] = typer.Option(None, "--root", help=ROOT_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Show what happened in a run, or list the runs under the root.

        sparkrecover inspect nightly
    """
    from sparkrecover.commands import inspect as command

    raise typer.Exit(command.run(run=run, root=root, json_output=json_output))


def _log_crash() -> str:
    path = os.path.join(tempfile.gettempdir(), f"sparkrecover-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"sparkrecover {__version__}\nargv: {sys.argv!r}\n\n")
        traceback.print_exc(file=handle)
    return path


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: the project's errors become one line and their exit code, never a traceback."""
    try:
        # typer 0.2x carries its own copy of click (and no longer installs click): its errors are
        # not click's.
        from typer._click.exceptions import ClickException
    except ImportError:
        from click import ClickException

    code: int
    try:
        result = app(args=argv, prog_name="sparkrecover", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except typer.Exit as stop:
        code = stop.exit_code
    except typer.Abort:
        code = EXIT_INTERRUPTED
    except ClickException as problem:
        problem.show()
        code = EXIT_USAGE if problem.exit_code == 2 else problem.exit_code
    except SparkRecoverError as problem:
        from sparkrecover import render

        render.error(str(problem))
        code = problem.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as problem:  # noqa: BLE001 - anything else is our bug: log it, say where
        path = _log_crash()
        print(f"error: internal error: {type(problem).__name__}: {problem} (traceback in {path})", file=sys.stderr)
        code = EXIT_INTERNAL
    sys.exit(code)
