"""Launching ``spark-submit``: finding it, the command line that runs the bootstrap, the
environment it runs in, and the child process itself (docs/design.md §7). Its arguments are
split, checked and edited in ``spark_argv.py``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable

from sparkrecover.errors import LaunchError
from sparkrecover.launch import spark_defaults, spark_log
from sparkrecover.launch.spark_argv import SubmitArgs, defaults_files, merge_list_option, with_conf_item, with_listener

BOOTSTRAP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "driver", "bootstrap.py")


def find_spark_submit(explicit: str | None = None) -> str:
    """--spark-submit, else $SPARK_HOME/bin, else PATH, else the one inside pyspark."""
    if explicit:
        found = shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) else None)
        if not found:
            raise LaunchError(f"--spark-submit {explicit}: not found or not executable")
        return os.path.abspath(found)
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        candidate = os.path.join(spark_home, "bin", "spark-submit")
        if os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("spark-submit")
    if on_path:
        return on_path
    try:
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.origin:
        candidate = os.path.join(os.path.dirname(spec.origin), "bin", "spark-submit")
        if os.access(candidate, os.X_OK):
            return candidate
    raise LaunchError("spark-submit not found: pass --spark-submit PATH, set SPARK_HOME, or install pyspark")


def bootstrap_command(
    spark_submit: str,
    parsed: SubmitArgs,
    bootstrap_args: list[str],
    listener_jar: str | None = None,
    appended: dict[str, str] | None = None,
) -> list[str]:
    """spark-submit <options> bootstrap.py <bootstrap args> -- app.py <app args>. ``appended``:
    values added to list settings (``spark.plugins``, ``spark.executor.extraClassPath``) after
    what the user set there."""
    app = parsed.app
    options = list(parsed.options)
    defaults = spark_defaults.list_values(defaults_files(parsed, spark_submit)) if listener_jar or appended else {}
    if listener_jar:
        options = with_listener(options, listener_jar, defaults)
    for key, value in (appended or {}).items():
        options = with_conf_item(options, key, value, defaults)
    if parsed.deploy_mode == "cluster":
        # The driver runs elsewhere: ship the script and refer to it by its name there.
        options = merge_list_option(options, "--files", app)
        app = os.path.basename(app)
    else:
        app = os.path.abspath(app)
    return [spark_submit, *options, BOOTSTRAP, *bootstrap_args, "--", app, *parsed.app_args]


# The Python a driver or its local workers run on: Spark's setting, and the variable it also reads.
PYTHON_SETTINGS = {"spark.pyspark.driver.python": "PYSPARK_DRIVER_PYTHON", "spark.pyspark.python": "PYSPARK_PYTHON"}


def python_settings(parsed: SubmitArgs) -> dict[str, str]:
    """The driver must import sparkrecover: in client mode it runs on this Python unless the user
    chose one; for local masters the workers do too (same machine, same packages)."""
    found = {}
    if parsed.deploy_mode == "client" and not parsed.conf("spark.pyspark.driver.python"):
        found["spark.pyspark.driver.python"] = sys.executable
        master = parsed.master or "local[*]"
        if master.startswith("local") and not parsed.conf("spark.pyspark.python"):
            found["spark.pyspark.python"] = sys.executable
    return found


def child_environment(parsed: SubmitArgs) -> dict[str, str]:
    """The environment of a spark-submit this process runs: ``python_settings`` as the variables
    Spark reads, unless the user set them. In client mode the driver logs warnings only, unless
    the user configured its logging (``spark_log``)."""
    env = dict(os.environ)
    for key, python in python_settings(parsed).items():
        env.setdefault(PYTHON_SETTINGS[key], python)
    java_options = " ".join(
        filter(None, [parsed.option("--driver-java-options"), parsed.conf("spark.driver.extraJavaOptions")])
    )
    if parsed.deploy_mode == "client" and not spark_log.user_configured(java_options, env):
        spark_log.with_quiet_driver_log(env)
    return env


def run_child(
    command: list[str],
    env: dict[str, str],
    cwd: str | None = None,
    started: Callable[[int], None] = lambda pid: None,
    stdout_to_stderr: bool = False,
) -> int:
    """Run spark-submit; SIGINT and SIGTERM are passed on to it; returns its exit code
    (128+N when it died of signal N). ``started`` is called with its pid once it really runs, so
    that a spark-submit that cannot be started leaves nothing journaled; if ``started`` fails,
    the child is killed (nobody would be recording it). ``stdout_to_stderr``: the child's stdout
    goes to our stderr (fd 2), leaving our stdout to one JSON document (``--json``)."""
    try:
        child = subprocess.Popen(
            command, env=env, cwd=cwd if cwd and os.path.isdir(cwd) else None, stdout=2 if stdout_to_stderr else None
        )
    except OSError as error:
        raise LaunchError(f"could not start {command[0]}: {error.strerror or error}") from None
    try:
        started(child.pid)
    except BaseException:
        child.kill()
        child.wait()
        raise

    def forward(signum: int, _frame: object) -> None:
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover - the handler above replaces it
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code
