"""``spark-submit-args``: what to hand a launcher that runs spark-submit itself (Airflow's
SparkSubmitOperator, a Kubernetes SparkApplication, YARN in cluster mode, a shell loop) so that it
runs the application under sparkrecover (docs/launchers.md).

The same command line ``submit`` builds (``attempts.bootstrap_launch``: the bootstrap as the
application, the listener's jar, the shuffle-keeping settings), without an attempt number and
without a lease token: the driver decides both from the journal (``driver/process/which_attempt.py``). Run
again after a crash, the same line resumes; run after success, it runs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sparkrecover.launch import attempts, launcher, spark_argv, spark_defaults
from sparkrecover.launch.options import RunOptions
from sparkrecover.rundir import runs


@dataclass
class Handoff:
    """The arguments after ``spark-submit``, whole (``argv``) and as a launcher's fields take them."""

    argv: list[str]
    application: str  # the driver bootstrap
    arguments: list[str]  # its arguments, then -- and the script with its own
    conf: dict[str, str]
    py_files: list[str]
    jars: list[str]
    files: list[str]

    def document(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "application": self.application,
            "arguments": self.arguments,
            "conf": self.conf,
            "py_files": self.py_files,
            "jars": self.jars,
            "files": self.files,
        }


def handoff(root: str, run_id: str, args: list[str], given: RunOptions, *, notify: Callable[[str], None]) -> Handoff:
    """The launcher's arguments for ``args`` (``[spark-submit options] app.py [app args]``, the
    options those that shape the launch: the master, the deploy mode, the user's jars and conf)."""
    runs.check_run_id(run_id)
    parsed = given.application(args, root)
    spark_submit = launcher.find_spark_submit(given.spark_submit)
    keep_shuffles = given.keep_shuffles
    if parsed.master is None:
        # A launcher may give spark-submit a master of its own before this line, which is not
        # known here: the Python the driver runs on is left to it, and keeping decides on the
        # master of spark-defaults.conf, or keeps nothing when none is named anywhere
        # (docs/decisions/0038-spark-submit-args-without-a-master.md).
        master, named_in = spark_defaults.master(spark_argv.defaults_files(parsed, spark_submit))
        if named_in is not None:
            parsed = replace(parsed, default_master=master)
            if keep_shuffles == "auto":
                notify(
                    f"no --master given after --: --keep-shuffles auto decided for {master}, the master "
                    f"spark-submit takes from {named_in}; a launcher that gives spark-submit another master "
                    "must give it after -- instead"
                )
        else:
            parsed = replace(parsed, master_unknown=True)
            if keep_shuffles == "auto":
                given = replace(given, keep_shuffles="off")
                notify(
                    "no --master after -- and no spark.master in spark-defaults.conf: shuffle map outputs are "
                    "not kept (--keep-shuffles auto cannot tell a local master from the one a launcher may "
                    "put before this line); give the master after --"
                )
    else:
        settings = []
        for key, python in launcher.python_settings(parsed).items():
            if not os.environ.get(launcher.PYTHON_SETTINGS[key]):
                settings += ["--conf", f"{key}={python}"]
        parsed = spark_argv.SubmitArgs([*parsed.options, *settings], parsed.app, parsed.app_args)
    spec = given.launch_spec(parsed, spark_submit)
    launch = attempts.bootstrap_launch(runs.Run.under(root, run_id), spec, notify=notify)
    if launch.keeping.reason is not None and keep_shuffles not in ("auto", "off"):
        notify(f"shuffle map outputs will not be kept (--keep-shuffles {keep_shuffles}): {launch.keeping.reason}")
    elif launch.keeping.reason is not None and launch.keeping.tell:
        notify(launch.keeping.reason)
    argv = launch.command[1:]
    split = spark_argv.split_submit_args(argv)
    return Handoff(
        argv=argv,
        application=split.app,
        arguments=split.app_args,
        conf=_confs(split),
        py_files=_listed(split, "--py-files"),
        jars=_listed(split, "--jars"),
        files=_listed(split, "--files"),
    )


def _confs(parsed: spark_argv.SubmitArgs) -> dict[str, str]:
    found = {}
    options = parsed.options
    for index, item in enumerate(options):
        if item in ("--conf", "-c") and index + 1 < len(options):
            key, _, value = options[index + 1].partition("=")
            found[key.strip()] = value
        elif item.startswith("--conf="):
            key, _, value = item[len("--conf=") :].partition("=")
            found[key.strip()] = value
    return found


def _listed(parsed: spark_argv.SubmitArgs, option: str) -> list[str]:
    return [item for item in (parsed.option(option) or "").split(",") if item]
