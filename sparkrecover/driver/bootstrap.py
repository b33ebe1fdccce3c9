"""The driver bootstrap: ``spark-submit`` runs this file in place of the user's script.

    bootstrap.py --run-dir URL --run-id ID [--attempt N] [--plan URL] [--flush-interval S]
                 [--buffer-size B] [--checksums] [--checkpoint-root URL] [--listener jvm|py4j]
                 [--lease-token TOKEN]
                 -- script.py [script args]

It first decides which attempt of its run it is (``driver/process/which_attempt.py``): the one ``submit`` or
``resume`` launched with ``--attempt``, ``--plan`` and ``--lease-token``, or, when something else
ran this command line again (YARN, an operator, an orchestrator, ``spark-submit-args``' line), the
next attempt of the run, planned here as ``resume`` plans it; a run that succeeded runs nothing.
Then it opens the driver's journal writer, loads the plan (pure data, docs/design.md §4 rule 8), hooks
SparkContext creation to attach the listener bridge and record ``driver.started``, runs the script as
``__main__`` with the script's own ``sys.argv``, and always writes ``driver.ended``.
``--listener jvm`` (what ``submit`` passes when it registered the JVM listener's jar) drains the
JVM listener; ``py4j`` registers the Py4J listener instead, the CLI having said why.
``--lease-token`` is the token of the lease the CLI holds: stages check it before writing and
committing, every file write's job commit checks it in the JVM, and a driver that lost it exits
75 (``driver/process/fence.py``). SIGINT and SIGTERM stop the script keeping what it finished, and the
driver exits 130 or 143 (``driver/process/signals.py``).
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder (the package itself) would be first on sys.path and its
# modules could shadow top-level ones; the package is imported by its full name instead.
if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    # Before anything imports pyspark: from the installed package's compiled files, not by
    # compiling the zip spark-submit put first on the path (about 1 s of CPU at every start).
    from sparkrecover.driver.process import compiled_pyspark

    compiled_pyspark.prefer_compiled()

import argparse
import runpy
import types
from typing import Any

from sparkrecover.driver.process import messages


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("sparkrecover bootstrap: expected '-- script.py [args]'")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="sparkrecover-bootstrap")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--run-id", required=True)
    # The attempt the command that launched it journaled; without it (a launcher's own command
    # line) the driver takes the next attempt of the run (driver/process/which_attempt.py).
    parser.add_argument("--attempt", type=int)
    parser.add_argument("--plan")
    parser.add_argument("--flush-interval", type=float, default=1.0)
    parser.add_argument("--buffer-size", type=int, default=1 << 20)
    parser.add_argument("--checksums", action="store_true")
    parser.add_argument("--checkpoint-root")
    parser.add_argument("--lease-token")
    parser.add_argument("--listener", choices=("jvm", "py4j"), default="py4j")
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def _hook_spark_context(rt: Any) -> None:
    """Attach the listener and record driver.started as soon as the script's SparkContext exists."""
    from pyspark import SparkContext

    from sparkrecover.driver import recall
    from sparkrecover.driver.process import fence, hadoopfs, log_filter, signals
    from sparkrecover.journal import events as ev

    original_init = SparkContext.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        hadoopfs.install(self)  # the script's data is seen through Spark's own filesystem client
        # Cosmetic: with a logging backend other than log4j2's core the message stays, nothing else.
        log_filter.drop_no_stages_registered(self._jvm)
        try:
            rt.telemetry.attach(self)
        except Exception as error:
            messages.say(f"sparkrecover: warning: Spark listener not registered: {error}")
        not_fenced = fence.arm(rt, self) if rt.lease_token is not None else None
        if not_fenced is not None and not not_fenced.startswith("the sparkrecover jar"):
            messages.say(
                f"sparkrecover: warning: job commits do not check the run's lease: {not_fenced}; a driver "
                "taken over while a write runs may still commit that write",
            )
        not_handed_on = signals.attach(rt, self)
        conf = self.getConf()
        recall.start(rt, conf)  # actions recorded and replayed, unless the run's conf turns it off
        rt.writer.emit(
            ev.DRIVER_STARTED,
            app_id=self.applicationId,
            master=self.master,
            deploy_mode=conf.get("spark.submit.deployMode", "client"),
            spark_version=self.version,
            pid=os.getpid(),
            listener=rt.telemetry.kind,
            commit_fence=not_fenced or "on",
            jvm_signals=not_handed_on or "on",
        )

    SparkContext.__init__ = init  # type: ignore[method-assign]  # patching the class is the point


def _run_script(script: str, args: list[str]) -> int:
    """Run the script as `python script.py args` would; returns its exit code."""
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = stop.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _is_ours(frame: Any) -> bool:
    """A frame plain ``spark-submit script.py`` would not have: this bootstrap, runpy running the
    script, or sparkrecover's hooks (by module name, docs/architecture.md; the demo is a user's)."""
    module = frame.f_globals.get("__name__") or ""
    if frame.f_code.co_filename in (__file__, os.path.abspath(__file__), runpy.__file__) or module == "runpy":
        return True
    own = module == "sparkrecover" or module.startswith("sparkrecover.")
    return own and not (module == "sparkrecover.demo" or module.startswith("sparkrecover.demo."))


def _user_frames(tb: Any) -> Any:
    """The traceback as ``spark-submit script.py`` prints it: the frames of the script, the
    libraries it calls and pyspark, none of ours (spark-submit merges the driver's stderr into
    its stdout, so frames of ours would change what users see). None when every frame is ours
    (a SyntaxError compiling the script prints as Python prints it: no traceback header)."""
    frames = []
    while tb is not None:
        if not _is_ours(tb.tb_frame):
            frames.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for kept in reversed(frames):
        rebuilt = types.TracebackType(rebuilt, kept.tb_frame, kept.tb_lasti, kept.tb_lineno)
    return rebuilt


def _trim(failure: BaseException) -> None:
    """Trim ours out of the failure and of every exception chained to it, as Python prints them."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [failure]
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        error.__traceback__ = _user_frames(error.__traceback__)
        todo += [error.__cause__, error.__context__]


def _close_telemetry(rt: Any) -> dict[str, Any]:
    try:
        return rt.telemetry.close()
    except Exception as error:
        messages.say(f"sparkrecover: warning: Spark listener events lost: {error}", through_jvm=rt.interrupted is None)
        return {}


def main(argv: list[str] | None = None) -> int:
    options, script_argv = _parse(list(sys.argv[1:] if argv is None else argv))
    if not script_argv:
        raise SystemExit("sparkrecover bootstrap: no script to run")
    from sparkrecover.driver.process import runtime, which_attempt
    from sparkrecover.driver.process.telemetry import Telemetry
    from sparkrecover.errors import SparkRecoverError
    from sparkrecover.journal import JournalWriter, runinfo
    from sparkrecover.journal import events as ev
    from sparkrecover.rundir.runs import Run

    try:
        start = which_attempt.begin(options)
    except which_attempt.Finished as done:  # a launcher's restart of a finished run: nothing runs
        which_attempt.say(str(done))
        return 0
    except SparkRecoverError as problem:  # a plan it cannot read, a run another process holds
        messages.say(f"sparkrecover: error: {problem}")
        return problem.exit_code
    writer = JournalWriter(
        Run(options.run_id, options.run_dir),
        start.attempt,
        ev.WRITER_DRIVER,
        buffer_size=options.buffer_size,
        flush_interval=options.flush_interval,
    )
    which_attempt.journal_start(
        start,
        writer,
        [os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)],
        runinfo.run_started(
            app=script_argv[0],
            app_args=script_argv[1:],
            spark_submit_args=[],  # the launcher's own, which this process cannot see
            spark_submit=None,
            cwd=os.getcwd(),
            flush_interval=options.flush_interval,
            buffer_size=options.buffer_size,
            checksums=options.checksums,
            checkpoint_root=options.checkpoint_root,
            keep_shuffles=None,
            started_by=runinfo.BY_LAUNCHER,
        ),
    )
    rt = runtime.Runtime(
        writer, options.run_dir, start.plan, checksums=options.checksums, checkpoint_root=options.checkpoint_root
    )
    rt.lease_token = start.token
    rt.telemetry = Telemetry(rt, options.listener, options.flush_interval)
    runtime.install(rt)
    _hook_spark_context(rt)
    from sparkrecover.driver import recall
    from sparkrecover.driver.process import signals
    from sparkrecover.driver.recall import actions, inferred_frames, models
    from sparkrecover.driver.recording import foreach, mlsaves, schema_reads, sqlwrites, zerocode

    zerocode.install(script_argv[0])  # zero-code mode: the script's own writes become stages
    sqlwrites.install()  # and so do its SQL statements that write
    mlsaves.install()  # and its model and pipeline saves (MLlib, ML)
    foreach.install()  # and its foreach/foreachPartition calls, kept per finished partition
    schema_reads.install()  # reads that infer a schema record it, and reuse it when resumed
    actions.install()  # actions record their results, and a resumed attempt replays them
    inferred_frames.install()  # and so does createDataFrame(rdd)'s schema inference
    models.install()  # and so do ML fits and MLlib trainings, their models saved by Spark's writers
    exit_code, error = 1, None
    signals.install(rt)  # SIGINT and SIGTERM stop the script and keep what it finished
    try:
        which_attempt.point_the_jvm(start, script_argv[0])
        exit_code = _run_script(script_argv[0], script_argv[1:])
    except KeyboardInterrupt:  # Ctrl-C, or a SIGTERM (driver/process/signals.py)
        exit_code, error = signals.exit_code(rt), "interrupted"
    except BaseException as failure:
        _trim(failure)
        try:
            sys.excepthook(type(failure), failure, failure.__traceback__)  # as Python reports it
        except OSError:  # stderr's pipe is gone with the JVM (messages.say)
            pass
        exit_code, error = 1, f"{type(failure).__name__}: {failure}"[:4000]
        if rt.interrupted is not None:
            # The signal's KeyboardInterrupt can surface as another error (a Py4J call it cut short
            # fails on its closed connection): the driver was stopped all the same, 128 + N.
            exit_code = signals.exit_code(rt)
    finally:
        signals.quiet()
        if rt.interrupted is not None and exit_code != 0:
            error = f"interrupted by {signals.name(rt.interrupted)}"
            messages.say(
                f"sparkrecover: stopped by {signals.name(rt.interrupted)}: what the driver finished is "
                f"journaled and kept for a resume of run {options.run_id} (exit {exit_code})",
                through_jvm=False,
            )
        recall.stop(rt)
        if rt.fenced:
            error = "lease lost: the run was taken over by another submit or resume"
        writer.emit(ev.DRIVER_ENDED, exit_code=exit_code, error=error, signal=rt.interrupted, **_close_telemetry(rt))
        which_attempt.journal_end(start, writer, exit_code)
        writer.close()
        if start.lease is not None:
            start.lease.release()
        if writer.degraded or writer.warnings:
            messages.say(
                "sparkrecover: warning: the journal had storage problems during this attempt; "
                "see journal.degraded events",
                through_jvm=rt.interrupted is None,
            )
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
