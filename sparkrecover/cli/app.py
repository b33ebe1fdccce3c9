"""The command line: builds the argument tree and dispatches; each command has a module of its own in cli/.

Heavy modules (pyspark, fsspec backends, the planner) are imported inside the commands so that
``sparkrecover --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from typing import TYPE_CHECKING, Any, List, Optional

import typer
from typer.core import TyperCommand

from sparkrecover.errors import EXIT_INTERRUPTED, EXIT_USAGE, SparkRecoverError
from sparkrecover.version import __version__

if TYPE_CHECKING:  # imported by the commands that use it: `sparkrecover --help` starts fast
    from sparkrecover.launch.options import RunOptions

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
MAX_ATTEMPTS_HELP = (
    "After a driver failure, resume automatically up to this many attempts in all; "
    "stops early when an attempt made no progress."
)
RUN_JSON_HELP = (
    "Print one JSON document on stdout at the end (run, outcome, exit code, attempts, stages, kept "
    "partitions, time saved); the application's own stdout goes to stderr."
)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


BEFORE_DASHES = "sparkrecover.before_dashes"  # ctx.meta: submit's pass-through arguments before `--`


class _Command(TyperCommand):
    """A command whose usage line reads as a shell user expects: ``RUN``, not typer's ``{RUN}``
    for a required argument, followed by what the command passes on (``usage_tail``)."""

    usage_tail: tuple[str, ...] = ()

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [
            piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
            for piece in super().collect_usage_pieces(ctx)
        ]
        return [*pieces, *self.usage_tail]

    def format_usage(self, ctx: Any, formatter: Any) -> None:
        # One line, never wrapped: click would cut "[APP ARGS]" in two at 80 columns.
        formatter.write(f"Usage: {ctx.command_path} {' '.join(self.collect_usage_pieces(ctx))}\n")


class _ResumeCommand(_Command):
    usage_tail = ("[-- SPARK-SUBMIT OPTIONS]",)


class _SubmitCommand(_Command):
    """``submit``'s command line, parsed up to the first ``--`` only, so that what was given
    before it can be told from what was given after it: before, an option nobody knows is a
    typo (``--run-idd``); after, everything is spark-submit's, untouched."""

    usage_tail = ("[--] [SPARK-SUBMIT OPTIONS] APP [APP ARGS]",)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" not in args:
            rest = super().parse_args(ctx, args)
            ctx.meta[BEFORE_DASHES] = list(rest)
            return rest
        cut = args.index("--")
        head = super().parse_args(ctx, args[:cut])
        ctx.meta[BEFORE_DASHES] = list(head)
        # As click would have it: `--` right after our options is dropped, later it is kept.
        ctx.args = [*head, "--", *args[cut + 1 :]] if head else list(args[cut + 1 :])
        return list(ctx.args)


def _option_names(command: Any) -> list[str]:
    return [name for param in command.params if param.param_type_name == "option" for name in param.opts]


def _check_before_dashes(ctx: typer.Context) -> None:
    """What submit or spark-submit-args was given before ``--`` must be its own or spark-submit's."""
    from sparkrecover.cli.submit import check_options

    group = ctx.parent.command if ctx.parent else None
    elsewhere = {
        name: _option_names(other) for name, other in getattr(group, "commands", {}).items() if other is not ctx.command
    }
    check_options(ctx.meta.get(BEFORE_DASHES, []), own=_option_names(ctx.command), elsewhere=elsewhere)


def _run_options(ctx: typer.Context) -> RunOptions:
    """submit's, spark-submit-args' or resume's own options, from what click parsed, built once
    and passed down whole (launch/options.py): a new option is a parameter and a field there."""
    from sparkrecover.launch.options import RunOptions

    return RunOptions.from_params(ctx.params)


# What submit records of how to journal a run, which spark-submit-args hands on the same way.
FLUSH_INTERVAL = typer.Option(
    1.0, "--flush-interval", min=0.0, metavar="SECONDS", help="Seconds between journal flushes."
)
BUFFER_SIZE = typer.Option(
    1 << 20, "--buffer-size", min=1, metavar="BYTES", help="Journal write buffer in bytes; a full buffer is flushed."
)
CHECKSUMS = typer.Option(
    False,
    "--checksums",
    help="Record a SHA-256 of every output file at commit, for resume --verify checksum (reads all output once more).",
)
CHECKPOINT_ROOT = typer.Option(
    None,
    "--checkpoint-root",
    metavar="URI",
    help="Where checkpoints without path= go (any fsspec URL; s3:// is s3a:// for Spark). "
    "Default: the run directory. Recorded: resume uses it too.",
)


NO_CLASS_ARCHIVE = typer.Option(
    False,
    "--no-class-archive",
    help="Start the driver JVM without its class-data-sharing archive of Spark's classes (made once in the "
    "background and given to every driver: docs/operations.md). Also: $SPARKRECOVER_NO_CLASS_ARCHIVE=1.",
)


def _complete_run(ctx: typer.Context, incomplete: str) -> list[str]:
    """Run ids under the root for shell completion; only a local root is listed, so TAB never
    waits on the network."""
    from sparkrecover.errors import UsageError
    from sparkrecover.rundir import runs, storage

    try:
        root = storage.resolve_root(ctx.params.get("root"))
    except UsageError:  # not a folder: nothing to offer, and TAB must print no error
        return []
    if not storage.is_local(root):
        return []
    return [run.id for run in runs.list_runs(root) if run.id.startswith(incomplete)]


def _complete_verify(incomplete: str) -> list[str]:
    from sparkrecover.rundir.manifests import VERIFY_LEVELS

    return [level for level in VERIFY_LEVELS if level.startswith(incomplete)]


def _complete_keep_shuffles(incomplete: str) -> list[str]:
    from sparkrecover.launch.shuffles import MODES

    return [mode for mode in MODES if mode.startswith(incomplete)]


# Options and the argument several commands share, declared once.
ROOT = typer.Option(None, "--root", metavar="URI", help=ROOT_HELP)
RUN = typer.Argument(
    ..., metavar="RUN", help="A run id under the root, or the URL of a run directory.", autocompletion=_complete_run
)
MAX_ATTEMPTS = typer.Option(1, "--max-attempts", min=1, metavar="N", help=MAX_ATTEMPTS_HELP)
RUN_JSON = typer.Option(False, "--json", help=RUN_JSON_HELP)  # submit, resume: the run's outcome
VIEW_JSON = typer.Option(False, "--json", help="Print one JSON document on stdout.")  # inspect, replay


def spark_submit_option(help: str) -> Any:
    """--spark-submit: each command says what it uses it for."""
    return typer.Option(None, "--spark-submit", metavar="PATH", help=help)


def keep_shuffles_option(help: str, **more: Any) -> Any:
    """--keep-shuffles: submit's, and spark-submit-args' (which decides without a master)."""
    return typer.Option("auto", "--keep-shuffles", metavar="MODE", help=help, **more)


def _version(value: bool) -> None:
    if value:
        print(f"sparkrecover {__version__}")
        raise typer.Exit(0)


@app.callback()
def _top_level(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Make long PySpark batch jobs survive driver crashes."""


@app.command(cls=_SubmitCommand, context_settings=PASS_THROUGH)
def submit(
    ctx: typer.Context,
    root: Optional[str] = ROOT,
    run_id: Optional[str] = typer.Option(
        None, "--run-id", metavar="ID", help="Name the run (default: time, app and a random suffix)."
    ),
    spark_submit: Optional[str] = spark_submit_option(
        "The spark-submit to use (default: $SPARK_HOME/bin, PATH, then pyspark's)."
    ),
    flush_interval: float = FLUSH_INTERVAL,
    buffer_size: int = BUFFER_SIZE,
    max_attempts: int = MAX_ATTEMPTS,
    checksums: bool = CHECKSUMS,
    checkpoint_root: Optional[str] = CHECKPOINT_ROOT,
    keep_shuffles: str = keep_shuffles_option(
        "auto|link|copy|off: keep each finished shuffle map task's output under the run, so a resume runs only "
        "the missing map tasks. auto: where it is a free hard link (a local master, Spark's local "
        "dir on the run directory's filesystem); link: hard links only; copy: copy each map output "
        "(costs disk writes, docs/shuffles.md); off. Recorded: resume uses it too.",
        autocompletion=_complete_keep_shuffles,
    ),
    no_class_archive: bool = NO_CLASS_ARCHIVE,
    json_output: bool = RUN_JSON,
) -> None:
    """Run a PySpark application through spark-submit with its progress journaled.

    sparkrecover's own options (listed below) come first; everything after them, or after --,
    goes to spark-submit untouched: its options, the application and the application's arguments.

    \b
        sparkrecover submit --run-id nightly -- --master 'local[*]' etl.py --day 2026-11-21

    With --run-id of an existing run: a finished run is not launched again (exit 0), an
    unfinished one is resumed, so one cron line is safe to repeat.
    """
    from sparkrecover.cli import submit as command

    _check_before_dashes(ctx)
    raise typer.Exit(command.run(_run_options(ctx), run_id=run_id, args=list(ctx.args)))


@app.command(cls=_ResumeCommand, context_settings={"allow_extra_args": True})
def resume(
    ctx: typer.Context,
    run: str = RUN,
    root: Optional[str] = ROOT,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and launch nothing."),
    rerun: List[str] = typer.Option(
        [],
        "--rerun",
        metavar="STAGE",
        help="Run this stage again even if it is intact (repeatable). STAGE is its name, the "
        "file:line#n an implicit write's name starts with, or any prefix of one name only.",
    ),
    from_scratch: bool = typer.Option(False, "--from-scratch", help="Run every stage again."),
    no_replay: bool = typer.Option(
        False,
        "--no-replay",
        help="Run every recorded action (count, collect, show, ...) again instead of replaying its result.",
    ),
    verify: str = typer.Option(
        "size",
        "--verify",
        metavar="LEVEL",
        autocompletion=_complete_verify,
        help="How to check committed outputs: size (files, sizes, _SUCCESS), footer (also Parquet/ORC magic "
        "bytes), checksum (also content digests recorded with submit --checksums).",
    ),
    max_attempts: int = MAX_ATTEMPTS,
    spark_submit: Optional[str] = spark_submit_option("The spark-submit to use (default: the recorded one)."),
    no_class_archive: bool = NO_CLASS_ARCHIVE,
    json_output: bool = RUN_JSON,
) -> None:
    """Relaunch a run, skipping the stages that finished and whose outputs survive.

    spark-submit options after -- are merged over the recorded ones:

    \b
        sparkrecover resume nightly -- --driver-memory 8g
    """
    from sparkrecover.cli import resume as command

    raise typer.Exit(
        command.run(
            _run_options(ctx),
            run=run,
            dry_run=dry_run,
            rerun=tuple(rerun),
            from_scratch=from_scratch,
            replay=not no_replay,
            verify=verify,
            extra=list(ctx.args),
        )
    )


@app.command(cls=_Command)
def inspect(
    run: Optional[str] = typer.Argument(
        None,
        metavar="RUN",
        help="A run id or run directory URL; without it, list the runs.",
        autocompletion=_complete_run,
    ),
    root: Optional[str] = ROOT,
    json_output: bool = VIEW_JSON,
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Watch a running run live until it ends, then show it as usual."
    ),
) -> None:
    """Show what happened in a run, or list the runs under the root.

    \b
        sparkrecover inspect
        sparkrecover inspect nightly
        sparkrecover inspect nightly --follow
    """
    from sparkrecover.cli import inspect as command

    raise typer.Exit(command.run(run=run, root=root, json_output=json_output, follow=follow))


@app.command(cls=_Command)
def replay(
    run: str = RUN,
    root: Optional[str] = ROOT,
    until: Optional[str] = typer.Option(
        None,
        "--until",
        metavar="SEQ|TIME",
        help="Stop after this event and show the run as it stood then, with what resume would have "
        "decided: an event number as replay prints it, ATTEMPT:WRITER:SEQ (2:driver:14) or an "
        "ISO time (2026-11-22T03:15:00Z, UTC unless an offset is given).",
    ),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="Check the whole journal instead (envelopes, seq numbers, order, torn tails); exit 3 on corruption.",
    ),
    json_output: bool = VIEW_JSON,
) -> None:
    """Show the journal as a timeline, one line per event, replayed as resume reads it.

    \b
        sparkrecover replay nightly
        sparkrecover replay nightly --until 2:driver:14
        sparkrecover replay nightly --verify
    """
    from sparkrecover.cli import replay as command

    raise typer.Exit(command.run(run=run, root=root, until=until, verify=verify, json_output=json_output))


@app.command(cls=_Command)
def report(
    run: str = RUN,
    root: Optional[str] = ROOT,
    output: Optional[str] = typer.Option(
        None,
        "--output",
        "-o",
        metavar="FILE",
        help="Where to write the page (default: RUN-report.html here; - for stdout).",
    ),
    open_browser: bool = typer.Option(
        False, "--open", help="Open the page in the default web browser, if there is one."
    ),
) -> None:
    """Write one self-contained HTML page of a run: its attempts on a timeline, what each resume
    skipped, kept and recomputed, the time recovery saved, and what the next resume would do.

    \b
        sparkrecover report nightly
        sparkrecover report nightly -o /tmp/nightly.html --open
        sparkrecover report nightly -o - > nightly.html
    """
    from sparkrecover.cli import report as command

    raise typer.Exit(command.run(run=run, root=root, output=output, open_browser=open_browser))


@app.command("spark-submit-args", cls=_SubmitCommand, context_settings=PASS_THROUGH)
def spark_submit_args(
    ctx: typer.Context,
    root: Optional[str] = ROOT,
    run_id: str = typer.Option(
        ...,
        "--run-id",
        metavar="ID",
        help="Name the run: every launch of the printed line is an attempt of this run.",
    ),
    spark_submit: Optional[str] = spark_submit_option(
        "The spark-submit whose Spark the listener's jar is built for (default: as submit finds it)."
    ),
    flush_interval: float = FLUSH_INTERVAL,
    buffer_size: int = BUFFER_SIZE,
    checksums: bool = CHECKSUMS,
    checkpoint_root: Optional[str] = CHECKPOINT_ROOT,
    keep_shuffles: str = keep_shuffles_option(
        "auto|link|copy|off, as submit --keep-shuffles; with no --master after --, auto decides for the "
        "spark.master of spark-defaults.conf, and keeps nothing when none is named."
    ),
    no_class_archive: bool = NO_CLASS_ARCHIVE,
    json_output: bool = typer.Option(
        False,
        "--json",
        help="Print {argv, application, arguments, conf, py_files, jars, files}: the fields of "
        "Airflow's SparkSubmitOperator and of a SparkApplication's spec.",
    ),
) -> None:
    """Print what to give another launcher (Airflow, a Kubernetes operator, YARN, a shell loop) so
    that it runs the application under sparkrecover: one shell-quoted line to put after
    `spark-submit`, read back with eval (a plain $(...) keeps the quotes). The same line run again
    after a crash resumes the run; run after it succeeded, it runs nothing.

    \b
        line=$(sparkrecover spark-submit-args --run-id n1 -- --master 'local[*]' etl.py) && eval "spark-submit $line"
        sparkrecover spark-submit-args --run-id nightly --json -- --master yarn etl.py

    spark-submit options given after -- (the master, the deploy mode, jars, conf) shape the line
    and are part of it. See docs/launchers.md.
    """
    from sparkrecover.cli import spark_submit_args as command

    _check_before_dashes(ctx)
    raise typer.Exit(command.run(_run_options(ctx), run_id=run_id, args=list(ctx.args)))


@app.command(cls=_Command)
def doctor(
    root: Optional[str] = ROOT,
    spark_submit: Optional[str] = spark_submit_option("The spark-submit to check (default: as submit finds it)."),
    json_output: bool = typer.Option(
        False, "--json", help='Print {"ok": ..., "checks": [{"check", "status", "detail"}, ...]} on stdout.'
    ),
) -> None:
    """Check what a run needs on this machine, one line each, and say what to fix: Java and javac,
    the listener's jar, spark-submit, the pyspark the driver imports (its Python files against its
    jars), the driver's Python importing sparkrecover, the root writable, and for a root on S3
    s3fs and Spark's s3a side. Exit 0 when nothing is a problem, 1 otherwise.

    \b
        sparkrecover doctor
        sparkrecover doctor --root s3://etl/sparkrecover
    """
    from sparkrecover.cli import doctor as command

    raise typer.Exit(command.run(root=root, spark_submit=spark_submit, json_output=json_output))


def _log_crash(argv: list[str]) -> str:
    """Write the traceback of an internal error to a log of its own, for a bug report. The
    command line is redacted as in the journal (docs/design.md §4 rule 9), and the file is the
    user's alone: it sits in a shared temporary folder, so mkstemp makes it new (never an existing
    file or link) and 0600."""
    from sparkrecover.journal import redact

    descriptor, path = tempfile.mkstemp(
        prefix=f"sparkrecover-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-", suffix=".log"
    )
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(f"sparkrecover {__version__}\nargv: {redact.redact_args(argv)!r}\n\n")
        traceback.print_exc(file=handle)
    return path


def _click_errors() -> tuple[type[typer.Exit], type[typer.Abort], Any]:  # Any: whichever click is running
    """(Exit, Abort, ClickException) as the running typer raises them: recent typers vendor their
    own copy of click, older ones use click itself, and a usage error of either must not be
    mistaken for an internal error."""
    click_exception = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return typer.Exit, typer.Abort, click_exception


# What people type to list runs, from other tools (git, docker, kubectl, pip).
_LISTING = {"runs", "list", "ls", "ps", "status", "show", "get"}


def _usage_message(problem: Any, argv: list[str]) -> str:
    """A click/typer usage error in the project's one-line voice (``error: ...``), pointing to the
    command's --help instead of typer's four-line box."""
    message = problem.format_message()
    given = next((arg for arg in argv if not arg.startswith("-")), "")
    # click's context of an option error may be the group's: the command is the first word.
    command = f"sparkrecover {given}" if given in _command_names() else "sparkrecover"
    if message.startswith("No such command"):
        if given in _LISTING:
            return f"no such command {given!r}: runs are listed by 'sparkrecover inspect' (one run: inspect RUN)"
        import difflib

        guess = difflib.get_close_matches(given, list(_command_names()), n=1, cutoff=0.6)
        hint = f": did you mean {guess[0]}?" if guess else f"; commands: {', '.join(_command_names())}"
        return f"no such command {given!r}{hint}"
    message = message[0].lower() + message[1:] if message[:1].isupper() and message[1:2].islower() else message
    return f"{message.rstrip('.')} (see '{command} --help')"


def _command_names() -> list[str]:
    return [
        command.name or (command.callback.__name__ if command.callback else "") for command in app.registered_commands
    ]


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: the project's errors become one line and their exit code, never a traceback."""
    exit_error, abort_error, click_error = _click_errors()
    code: int
    try:
        result = app(args=argv, prog_name="sparkrecover", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except exit_error as stop:
        code = stop.exit_code
    except abort_error:
        code = EXIT_INTERRUPTED
    except click_error as problem:
        print(f"error: {_usage_message(problem, list(sys.argv[1:] if argv is None else argv))}", file=sys.stderr)
        code = EXIT_USAGE if problem.exit_code == 2 else problem.exit_code
    except SparkRecoverError as problem:
        from sparkrecover.cli import render

        render.error(str(problem))
        code = problem.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as problem:
        path = _log_crash(list(sys.argv[1:] if argv is None else argv))
        print(f"error: internal error: {type(problem).__name__}: {problem} (traceback in {path})", file=sys.stderr)
        code = EXIT_INTERNAL
    sys.exit(code)
