"""``sparkrecover resume``."""

from __future__ import annotations

from contextlib import ExitStack

from sparkrecover.cli import render
from sparkrecover.cli.report import command_for
from sparkrecover.errors import UsageError
from sparkrecover.launch import recovery
from sparkrecover.launch.options import RunOptions
from sparkrecover.planning.next_attempt import ResumePlan
from sparkrecover.rundir import runs, storage
from sparkrecover.rundir.manifests import VERIFY_LEVELS


def run(
    given: RunOptions,
    *,
    run: str,
    dry_run: bool,
    rerun: tuple[str, ...],
    from_scratch: bool,
    replay: bool = True,
    verify: str,
    extra: list[str],
) -> int:
    if verify not in VERIFY_LEVELS:
        raise UsageError(f"--verify {verify}: expected one of {', '.join(VERIFY_LEVELS)}")
    root, json_output = given.root, given.json_output
    resolved = runs.resolve_run(run, storage.resolve_root(root))
    options = recovery.ResumeOptions.of(
        given,
        extra_options=tuple(extra),
        verify_level=verify,
        rerun=rerun,
        from_scratch=from_scratch,
        replay=replay,
    )
    if dry_run:
        with render.file_progress(enabled=not json_output) as progress:
            plan, complete = recovery.dry_run(resolved, options, warn=render.warning, progress=progress)
        document = plan.dry_run()
        if complete:
            document["complete"] = True  # nothing will run unless --rerun or --from-scratch says so
        if json_output:
            render.emit_json(document)
        else:
            render.plan(document)
            if complete:
                render.info(
                    f"run {resolved.id} already completed successfully; resume would launch nothing", render.report()
                )
        return 0
    with ExitStack() as bar:
        progress = bar.enter_context(render.file_progress(enabled=not json_output))

        def show(plan: ResumePlan) -> None:
            bar.close()  # the progress bar goes before the plan, and before the driver's output
            if not json_output:
                render.plan(plan.dry_run(), to=render.console())

        outcome = recovery.resume(
            resolved, options, notify=render.info, warn=render.warning, show_plan=show, progress=progress
        )
    render.command_summary(outcome, json_output)
    if not json_output and not outcome.complete:
        render.info(f"to see the run as a page: {command_for(resolved.id, root)}")
    return outcome.exit_code
