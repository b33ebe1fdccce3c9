"""Running one attempt of a run: the CLI's side of the journal, the lease and spark-submit.

``submit`` starts a run and its first attempt; ``resume`` plans and starts the next one. Both end
up in ``run_attempt``, which journals ``attempt.started``/``attempt.ended`` around one
``spark-submit`` of the driver bootstrap.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sparkrecover.errors import SparkRecoverError, UsageError
from sparkrecover.journal import JournalWriter, reader, redact, runinfo
from sparkrecover.journal import events as ev
from sparkrecover.journal.segments import latest_attempt
from sparkrecover.journal.writer import DEFAULT_BUFFER_SIZE, DEFAULT_FLUSH_INTERVAL
from sparkrecover.launch import launcher, shuffles, spark_argv
from sparkrecover.launch.jvm_files import class_archive
from sparkrecover.rundir import keep, plans, results, runs, storage
from sparkrecover.rundir.plans import KeptShuffle
from sparkrecover.rundir.runs import Run

if TYPE_CHECKING:
    from sparkrecover.launch.jvm_files.listener_jar import ListenerJar


@dataclass
class LaunchSpec:
    """Everything needed to (re)launch the application, as the first submit recorded it."""

    spark_submit: str
    submit_args: spark_argv.SubmitArgs
    cwd: str = field(default_factory=os.getcwd)
    flush_interval: float = DEFAULT_FLUSH_INTERVAL
    buffer_size: int = DEFAULT_BUFFER_SIZE
    checksums: bool = False  # record content digests of outputs at commit (--verify checksum)
    # Where checkpoints without an explicit path= go, when not <run dir>/checkpoints (an fsspec URL).
    checkpoint_root: str | None = None
    # --keep-shuffles: auto | link | copy | off (launch/shuffles.py)
    keep_shuffles: str = shuffles.DEFAULT_MODE
    # --no-class-archive: the driver JVM without its class-data-sharing archive (not recorded:
    # it is this machine's matter, not the run's; each command says it again)
    class_archive: bool = True

    def run_started_payload(self) -> dict[str, Any]:
        return runinfo.run_started(
            app=self.submit_args.app,
            app_args=self.submit_args.app_args,
            spark_submit_args=self.submit_args.options,
            spark_submit=self.spark_submit,
            cwd=self.cwd,
            flush_interval=self.flush_interval,
            buffer_size=self.buffer_size,
            checksums=self.checksums,
            checkpoint_root=self.checkpoint_root,
            keep_shuffles=self.keep_shuffles,
            started_by=runinfo.BY_SUBMIT,
        )

    @classmethod
    def from_run_started(
        cls,
        record: dict[str, Any],
        extra_options: list[str],
        spark_submit: str | None = None,
        app_args_now: list[str] | None = None,
    ) -> LaunchSpec:
        """The recorded launch with ``extra_options`` given after ``resume --`` merged over it.

        Redacted values (docs/design.md §4 rule 9) are never relaunched: each must be given again
        after ``--``, or, for the application's own arguments, by the same command line again
        (``submit --run-id``).
        """
        options = merge_options(list(record.get("spark_submit_args") or []), extra_options)
        missing = redact.has_redacted(options)
        app_args = list(record.get("app_args") or [])
        if app_args_now is not None and redact.redact_args(app_args_now) == app_args:
            app_args = list(app_args_now)  # the same arguments, with their secrets
        if missing or redact.has_redacted(app_args):
            raise UsageError(
                "the recorded launch had secrets, which sparkrecover does not keep: give "
                "them again after '--' (e.g. resume RUN -- --conf key=value) or through the "
                f"environment; redacted: {', '.join(missing or redact.has_redacted(app_args))}"
            )
        parsed = spark_argv.SubmitArgs(options=options, app=record["app"], app_args=app_args)
        # --spark-submit given again is looked up as on submit; the recorded one is a full path.
        found = launcher.find_spark_submit(spark_submit) if spark_submit else None
        return cls(
            spark_submit=found or record.get("spark_submit") or launcher.find_spark_submit(),
            submit_args=parsed,
            cwd=record.get("cwd") or os.getcwd(),
            flush_interval=float(record.get("flush_interval") or DEFAULT_FLUSH_INTERVAL),
            buffer_size=int(record.get("buffer_size") or DEFAULT_BUFFER_SIZE),
            checksums=bool(record.get("checksums")),
            checkpoint_root=record.get("checkpoint_root") or None,
            keep_shuffles=_keep_mode(record.get("keep_shuffles")),
        )


def merge_options(recorded: list[str], extra: list[str]) -> list[str]:
    """spark-submit options of ``extra`` replace the same options (or ``--conf`` keys) recorded."""
    if not extra:
        return recorded
    parsed_extra = spark_argv.split_submit_args([*extra, "app.py"]).options
    replaced = {_option_key(parsed_extra, i) for i in _option_starts(parsed_extra)}
    kept: list[str] = []
    for index in _option_starts(recorded):
        width = 2 if recorded[index] in spark_argv.OPTIONS_WITH_VALUE else 1
        if _option_key(recorded, index) not in replaced:
            kept.extend(recorded[index : index + width])
    return kept + parsed_extra


def _option_starts(options: list[str]) -> list[int]:
    starts, index = [], 0
    while index < len(options):
        starts.append(index)
        index += 2 if options[index] in spark_argv.OPTIONS_WITH_VALUE else 1
    return starts


def _option_key(options: list[str], index: int) -> str:
    name = options[index]
    if name in ("--conf", "-c"):
        return "conf:" + options[index + 1].split("=", 1)[0].strip()
    return name.split("=", 1)[0]


# Runs already warned that Spark Connect hides their writes: once per command, not per retry.
_WARNED_CONNECT: set[str] = set()


def _warn_spark_connect(run_id: str, args: spark_argv.SubmitArgs, warn: Callable[[str], None]) -> None:
    remote = spark_argv.spark_connect(args)  # its ";token=…" parameters are never shown
    if remote and run_id not in _WARNED_CONNECT:
        _WARNED_CONNECT.add(run_id)
        warn(
            f"the app talks to Spark Connect ({remote.split(';', 1)[0]}): "
            "its writes run in the Connect server's driver and cannot be recorded; a resume reruns all of them"
        )


@dataclass
class BootstrapLaunch:
    """The spark-submit command line that runs the application under the bootstrap, and what
    went into it: built once, for ``submit``/``resume`` and for ``spark-submit-args``."""

    command: list[str]  # spark-submit <options> …/driver/bootstrap.py <its args> -- app.py <args>
    bootstrap_args: list[str]
    keeping: shuffles.Setup
    jar: str | None
    archive: class_archive.ClassArchive | None = None  # the driver's, given or still to be made


def bootstrap_launch(
    run: Run,
    spec: LaunchSpec,
    *,
    attempt: int | None = None,
    plan_url: str | None = None,
    reuse: list[KeptShuffle] | None = None,
    lease_token: str | None = None,
    notify: Callable[[str], None] = lambda message: None,
) -> BootstrapLaunch:
    """The command line of one attempt, or (no ``attempt``, no token: ``spark-submit-args``) of a
    driver that decides its attempt from the journal and takes the lease itself."""
    bootstrap_args = ["--run-dir", run.dir, "--run-id", run.id]
    if attempt is not None:
        bootstrap_args += ["--attempt", str(attempt)]
    bootstrap_args += ["--flush-interval", str(spec.flush_interval), "--buffer-size", str(spec.buffer_size)]
    if lease_token:
        bootstrap_args += ["--lease-token", lease_token]  # the driver fences itself on it
    if spec.checksums:
        bootstrap_args += ["--checksums"]
    if spec.checkpoint_root:
        bootstrap_args += ["--checkpoint-root", spec.checkpoint_root]
    if plan_url is not None:
        bootstrap_args += ["--plan", plan_url]
    built = _listener_jar(spec.spark_submit, notify)
    jar = built.path
    bootstrap_args += ["--listener", "jvm" if jar else "py4j"]
    keeping = shuffles.setup(
        spark_argv.with_default_master(spec.submit_args, spec.spark_submit),
        run.dir,
        spec.keep_shuffles,
        jar=jar,
        spark_version=built.spark_version,
        reuse=reuse,
        attempt=attempt or 1,
        make_folder=attempt is not None,  # spark-submit-args prints a line and changes nothing
    )
    submit_args = spark_argv.SubmitArgs(
        [*spec.submit_args.options, *keeping.options], spec.submit_args.app, spec.submit_args.app_args
    )
    archive = class_archive.archive_for(spec.spark_submit, spec.submit_args, jar) if spec.class_archive else None
    if archive is not None and class_archive.ready(archive):
        defaults = spark_argv.defaults_files(submit_args, spec.spark_submit)
        # A spark-submit-args line (no attempt) names no verdict file: it may run anywhere.
        given = archive.driver_options(verdict=attempt is not None)
        options = spark_argv.with_java_options(submit_args.options, defaults, given)
        submit_args = replace(submit_args, options=options)
    command = launcher.bootstrap_command(
        spec.spark_submit, submit_args, bootstrap_args, listener_jar=jar, appended=keeping.appended
    )
    return BootstrapLaunch(command, bootstrap_args, keeping, jar, archive)


def make_class_archive(launch: BootstrapLaunch, spec: LaunchSpec) -> None:
    """After a driver that had no archive (or whose JVM refused it): make one in the background,
    by a warm-up application run as this driver would be, on a local master
    (launch/jvm_files/class_archive.py). Never an error: a build that cannot be made leaves a note."""
    archive = launch.archive
    if archive is None or class_archive.ready(archive) or not class_archive.needs_build(archive):
        return
    reason = class_archive.unarchivable(archive, spec.spark_submit)
    try:
        os.makedirs(os.path.dirname(archive.path), exist_ok=True)
        if reason is not None:
            class_archive.write_whole(archive.failed, reason + "\n")
            return
        work = tempfile.mkdtemp(prefix="build-", dir=os.path.dirname(archive.path))
    except OSError:
        return
    warmup = LaunchSpec(
        spark_submit=spec.spark_submit,
        submit_args=class_archive.warmup_args(archive, spec.submit_args, work),
        cwd=work,
        class_archive=False,
    )
    command = bootstrap_launch(Run.under(os.path.join(work, "root"), "warmup"), warmup).command
    if not class_archive.start_build(archive, command, launcher.child_environment(warmup.submit_args), work):
        shutil.rmtree(work, ignore_errors=True)


def run_attempt(
    run: Run,
    attempt: int,
    spec: LaunchSpec,
    *,
    started_by: str,
    plan: plans.Plan | None = None,
    first: bool = False,
    lease_token: str | None = None,
    notify: Callable[[str], None] = lambda message: None,
    warn: Callable[[str], None] | None = None,
    stdout_to_stderr: bool = False,
) -> int:
    """One spark-submit of the bootstrap; returns the application's exit code. The caller holds
    the run's lease.

    The attempt (and on a first one the run) is journaled only once spark-submit is running: one
    that cannot be started is an error to fix and try again, not an attempt that crashed."""
    spark_argv.check_deploy_mode(spec.submit_args)  # a resume's merged options, too
    _warn_spark_connect(run.id, spec.submit_args, warn or notify)
    plan_url = None
    if plan is not None:
        # Written before the launch: the driver reads it as it starts. A launch that fails leaves
        # it for the next attempt of the same number to overwrite.
        plan_url = run.plan_url(attempt)
        storage.write_atomic(plan_url, plans.encode(plan))
    launch = bootstrap_launch(
        run,
        spec,
        attempt=attempt,
        plan_url=plan_url,
        reuse=plan.shuffles if plan else None,
        lease_token=lease_token,
        notify=notify,
    )
    command, keeping = launch.command, launch.keeping
    if keeping.tell and keeping.reason is not None:
        (warn or notify)(keeping.reason)
    writers: list[JournalWriter] = []

    def journal_start(_pid: int) -> None:
        writer = JournalWriter(
            run, attempt, ev.WRITER_CLI, buffer_size=spec.buffer_size, flush_interval=spec.flush_interval
        )
        writers.append(writer)
        if first:
            writer.emit(ev.RUN_STARTED, **spec.run_started_payload())
        writer.emit(ev.ATTEMPT_STARTED, **runinfo.attempt_started(command, started_by))
        if keeping.reason is not None:
            writer.emit(ev.SHUFFLE_UNSUPPORTED, reason=keeping.reason, stage=None, spark_shuffle=None)
        if plan is not None:
            writer.emit(
                ev.PLAN_CREATED,
                plan=f"{runs.PLANS_DIR}/{attempt:04d}.json",
                # With kept partitions (continue): the end-of-command summary counts them.
                stages=[entry.summary() for entry in plan.stages],
            )
        writer.flush()

    try:
        code = launcher.run_child(
            command,
            launcher.child_environment(spec.submit_args),
            cwd=spec.cwd,
            started=journal_start,
            stdout_to_stderr=stdout_to_stderr,
        )
        later = _latest_attempt(run.dir, attempt)
        if later > attempt:
            # While spark-submit waited, the cluster restarted the driver (YARN's next application
            # attempt), which journaled itself as a later attempt: spark-submit's code is the
            # application's, not this attempt's, whose driver stopped (its driver.ended says how).
            writers[0].emit(
                ev.ATTEMPT_ENDED, exit_code=None, signal=None, continued_by=later, application_exit_code=code
            )
            notify(
                f"the driver of attempt {attempt} stopped and the cluster restarted it: attempt {later} "
                f"carried the run on (exit {code})"
            )
        else:
            writers[0].emit(ev.ATTEMPT_ENDED, exit_code=code, signal=code - 128 if code > 128 else None)
    finally:
        for writer in writers:
            writer.close()
    make_class_archive(launch, spec)
    if later <= attempt:
        _report_journal_health(run.dir, attempt, code, writers[0], warn or notify)
    if keeping.reason is not None and spec.keep_shuffles != "auto":
        (warn or notify)(f"shuffle map outputs were not kept (--keep-shuffles {spec.keep_shuffles}): {keeping.reason}")
    if code == 0 and keep.remove(run.dir):
        notify("removed the kept shuffle map outputs: the run succeeded")
    if code == 0 and results.remove(run.dir):
        notify("removed the recorded action results: the run succeeded")
    return code


def _latest_attempt(run_dir: str, attempt: int) -> int:
    try:
        return latest_attempt(run_dir)
    except (SparkRecoverError, OSError):  # the journal's storage: the driver's own warnings tell
        return attempt


def _report_journal_health(
    run_dir: str, attempt: int, code: int, writer: JournalWriter, warn: Callable[[str], None]
) -> None:
    """§4 rule 7 says the journal warns: the driver's warnings went to its stderr, which may be a
    cluster log nobody reads, so the CLI repeats them from the journal once the attempt is over."""
    gaps, driver_ended = reader.attempt_health(run_dir, attempt)
    for gap in gaps:
        lost = ""
        if gap.get("dropped_events"):
            lost = f"; {gap['dropped_events']} events were dropped"
            if gap.get("dropped_stages"):
                lost += f" (stages {', '.join(map(str, gap['dropped_stages']))} will run again on resume)"
        warn(
            f"the journal's storage failed from {gap.get('since')} to {gap.get('until')} during attempt "
            f"{attempt} ({gap.get('error')}){lost}"
        )
    if writer.warnings and not any(gap.get("writer") == ev.WRITER_CLI for gap in gaps):
        warn(f"the journal's storage failed during attempt {attempt}: {writer.warnings[-1]}")
    if code == 0 and not driver_ended:
        warn(
            f"the driver's journal of attempt {attempt} is incomplete (no driver.ended record): its "
            "storage may have failed; resume reruns whatever it cannot prove finished"
        )


_said_why: set[str] = set()


def _listener_jar(spark_submit: str, notify: Callable[[str], None]) -> ListenerJar:
    """The JVM listener's jar for this Spark (its path None, said once per process with why,
    when there is none)."""
    from sparkrecover.launch.jvm_files import listener_jar

    found = listener_jar.ensure_jar(spark_submit)
    if found.compiled:
        notify(f"compiled the JVM listener for this Spark into {found.path}")
    if found.path is None and found.reason not in _said_why:
        _said_why.add(found.reason or "")
        notify(
            f"Spark events are journaled through the slower Py4J listener, which can fall behind "
            f"on task-heavy jobs: {found.reason}"
        )
    return found


def _keep_mode(recorded: Any) -> str:
    """The recorded --keep-shuffles (runs from before it existed: the default)."""
    return recorded if recorded in shuffles.MODES else shuffles.DEFAULT_MODE
