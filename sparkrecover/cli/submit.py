"""``sparkrecover submit``."""

from __future__ import annotations

import difflib

from sparkrecover.cli import render
from sparkrecover.errors import UsageError
from sparkrecover.launch import recovery, spark_argv
from sparkrecover.launch.options import RunOptions
from sparkrecover.rundir import storage


def check_options(before_dashes: list[str], own: list[str], elsewhere: dict[str, list[str]]) -> None:
    """Refuse an option given before ``--`` that neither sparkrecover nor spark-submit knows:
    handed on, it would launch a run that spark-submit rejects, or one without the option the
    user meant (``--run-idd x`` would start a run under a random id, which no later ``resume``
    finds by the name the user gave). ``own`` are submit's options, ``elsewhere`` the other
    commands' (``--dry-run`` belongs to ``resume``)."""
    unknown = spark_argv.unknown_options(before_dashes)
    if not unknown:
        return
    option = unknown[0]
    name = option.split("=", 1)[0]
    if name in own:
        # click stops at the first spark-submit option: what follows is spark-submit's.
        raise UsageError(f"{name} is sparkrecover's option: give it before spark-submit's options, or before --")
    owners = [command for command, options in elsewhere.items() if name in options]
    if owners:
        raise UsageError(f"no such option {name}: it is an option of {' and '.join(owners)}, not of submit")
    known = [*own, *sorted(spark_argv.OPTIONS_WITH_VALUE | spark_argv.SWITCHES)]
    guess = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    raise UsageError(
        f"no such option {name} (neither sparkrecover's nor spark-submit's)"
        + (f": did you mean {guess[0]}?" if guess else "")
    )


def run(options: RunOptions, *, run_id: str | None, args: list[str]) -> int:
    root, json_output = options.root, options.json_output
    outcome = recovery.submit(
        storage.resolve_root(root),
        run_id,
        args,
        options,
        notify=render.info,
        warn=render.warning,
        show_plan=lambda plan: None if json_output else render.plan(plan.dry_run(), to=render.console()),
    )
    render.command_summary(outcome, json_output)
    code = outcome.exit_code
    if not json_output:
        if code != 0:
            render.warning(
                f"run {outcome.run.id} ended with exit code {code}; to continue where it stopped: "
                f"sparkrecover resume {outcome.run.id}" + ("" if root is None else f" --root {root}")
            )
        report_hint(outcome, root)
    return code


def report_hint(outcome: recovery.Outcome, root: str | None) -> None:
    """After a run that failed or was resumed, the command that shows it as a page."""
    from sparkrecover.cli.report import command_for

    resumed = outcome.state is not None and any(number > 1 for number in outcome.state.attempts)
    if outcome.exit_code != 0 or resumed:
        render.info(f"to see the run as a page: {command_for(outcome.run.id, root)}")
