"""Launching ``spark-submit``: finding it, splitting its command line, running it (docs/design.md §7)."""

from __future__ import annotations

import difflib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sparkrecover.errors import LaunchError, UsageError
from sparkrecover.jvm import EXECUTOR_CLASS_PATH_CONF, LISTENER_CLASS, LISTENERS_CONF
from sparkrecover.launch import spark_defaults, spark_log

# spark-submit options that take a value (SparkSubmitOptionParser, Spark 3.5 and 4.x).
OPTIONS_WITH_VALUE = frozenset(
    {
        "--class",
        "--conf",
        "-c",
        "--deploy-mode",
        "--driver-class-path",
        "--driver-default-class-path",
        "--driver-cores",
        "--driver-java-options",
        "--driver-library-path",
        "--driver-memory",
        "--executor-memory",
        "--files",
        "--jars",
        "--kill",
        "--master",
        "--remote",
        "--name",
        "--packages",
        "--exclude-packages",
        "--properties-file",
        "--extra-properties-file",
        "--proxy-user",
        "--py-files",
        "--repositories",
        "--status",
        "--total-executor-cores",
        "--archives",
        "--executor-cores",
        "--keytab",
        "--num-executors",
        "--principal",
        "--queue",
    }
)
SWITCHES = frozenset(
    {"--help", "-h", "--supervise", "--usage-error", "--verbose", "-v", "--version", "--load-spark-defaults"}
)

BOOTSTRAP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "driver", "bootstrap.py")


@dataclass
class SubmitArgs:
    """A spark-submit command line split into its options, the application and its arguments."""

    options: list[str] = field(default_factory=list)
    app: str = ""
    app_args: list[str] = field(default_factory=list)
    # The master spark-submit takes when the options give none (``with_default_master``): never
    # part of the command line, only what sparkrecover decides on.
    default_master: str | None = None
    # Nothing names the master, and a launcher may put its own before this command line (the
    # spark-submit-args line): decisions that a cluster's executors would break take it as one.
    master_unknown: bool = False

    def option(self, name: str) -> str | None:
        """The last value given for an option (``--master x`` or ``--master=x``)."""
        value = None
        items = self.options
        for index, item in enumerate(items):
            if item == name and index + 1 < len(items):
                value = items[index + 1]
            elif item.startswith(name + "="):
                value = item.split("=", 1)[1]
        return value

    def conf(self, key: str) -> str | None:
        value = None
        for index, item in enumerate(self.options):
            if item in ("--conf", "-c") and index + 1 < len(self.options):
                name, _, given = self.options[index + 1].partition("=")
                if name.strip() == key:
                    value = given
        return value

    @property
    def deploy_mode(self) -> str:
        return self.option("--deploy-mode") or self.conf("spark.submit.deployMode") or "client"

    @property
    def master(self) -> str | None:
        return self.option("--master") or self.conf("spark.master") or self.default_master


def split_submit_args(args: list[str]) -> SubmitArgs:
    """Find the primary resource: the first argument that is neither an option nor its value."""
    parsed = SubmitArgs()
    index = 0
    while index < len(args):
        item = args[index]
        if item == "--":
            index += 1
            continue
        if item in OPTIONS_WITH_VALUE:
            if index + 1 >= len(args):
                raise UsageError(f"spark-submit option {item} needs a value")
            parsed.options += [item, args[index + 1]]
            index += 2
            continue
        if item.startswith("-") and (item in SWITCHES or "=" in item or item.startswith("--")):
            parsed.options.append(item)
            index += 1
            continue
        parsed.app, parsed.app_args = item, list(args[index + 1 :])
        return parsed
    raise UsageError("no application given: sparkrecover submit [OPTIONS] [--] [spark-submit options] app.py [args]")


def unknown_options(args: list[str]) -> list[str]:
    """The options before the application that spark-submit does not know (``--x`` or ``--x=1``
    as given), in order. Used on what came before ``--`` only: there, an option nobody knows is a
    typo of one of sparkrecover's far more often than a spark-submit option newer than this list."""
    unknown = []
    index = 0
    while index < len(args):
        item = args[index]
        name = item.split("=", 1)[0]
        if item == "--":
            index += 1
        elif item in OPTIONS_WITH_VALUE:
            index += 2
        elif name in OPTIONS_WITH_VALUE or name in SWITCHES:
            index += 1
        elif item.startswith("-") and item != "-":
            unknown.append(item)
            index += 1
        else:
            break  # the application: what follows is its own
    return unknown


def check_application(parsed: SubmitArgs) -> None:
    if parsed.app.endswith(".jar") or parsed.option("--class"):
        raise UsageError(
            f"{parsed.app}: JVM applications are not supported yet; sparkrecover runs "
            "PySpark applications (a .py primary resource)"
        )
    if not parsed.app.endswith(".py"):
        typo = _typo_before(parsed)
        if typo:
            raise UsageError(f"{typo} ({parsed.app} was taken for the application)")
        raise UsageError(f"{parsed.app}: expected a Python script (.py) as the application")
    if not os.path.isfile(parsed.app) and parsed.deploy_mode == "client":
        raise UsageError(f"{parsed.app}: no such file")
    check_deploy_mode(parsed)


def _typo_before(parsed: SubmitArgs) -> str | None:
    """Why the application was taken to be what it is, when the option just before it is a typo
    of one that takes a value (``--mastr local[2] app.py``: ``local[2]`` became the application)."""
    if not parsed.options:
        return None
    name = parsed.options[-1].split("=", 1)[0]
    if "=" in parsed.options[-1] or name in OPTIONS_WITH_VALUE or name in SWITCHES:
        return None
    guess = difflib.get_close_matches(name, sorted(OPTIONS_WITH_VALUE), n=1, cutoff=0.75)
    return f"no such spark-submit option {name}: did you mean {guess[0]}?" if guess else None


def check_deploy_mode(parsed: SubmitArgs) -> None:
    """Refuse what spark-submit would refuse after starting: cluster mode for a Python app on a
    standalone master (``spark://``), which Spark does not support."""
    if parsed.deploy_mode == "cluster" and (parsed.master or "").startswith("spark://"):
        raise UsageError(
            f"--deploy-mode cluster with --master {parsed.master}: Spark runs Python apps on "
            "standalone in client mode only; drop --deploy-mode cluster"
        )


def spark_connect(parsed: SubmitArgs, env: dict[str, str] | None = None) -> str | None:
    """The Spark Connect server the app will talk to (``--remote``, ``spark.remote``,
    ``SPARK_REMOTE``), or None. Its driver is the Connect server's: nothing we hook runs there."""
    return (
        parsed.option("--remote")
        or parsed.conf("spark.remote")
        or (os.environ if env is None else env).get("SPARK_REMOTE")
        or None
    )


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
        options = _merge_list_option(options, "--files", app)
        app = os.path.basename(app)
    else:
        app = os.path.abspath(app)
    return [spark_submit, *options, BOOTSTRAP, *bootstrap_args, "--", app, *parsed.app_args]


def _merge_list_option(options: list[str], name: str, value: str) -> list[str]:
    merged = list(options)
    for index, item in enumerate(merged):
        if item == name and index + 1 < len(merged):
            merged[index + 1] = f"{merged[index + 1]},{value}"
            return merged
    return [*merged, name, value]


def with_listener(options: list[str], jar: str, defaults: dict[str, str]) -> list[str]:
    """The options with the JVM listener added: its jar to the jars and its class to
    ``spark.extraListeners``, each appended to what the user set there rather than replacing it,
    whether that came from ``--jars``, ``--conf`` or the properties file (which any value given on
    the command line would otherwise override)."""
    merged = list(options)
    found = _last_option_value(merged, "--jars") or _last_conf_value(merged, "spark.jars")
    if found is not None:
        _append_at(merged, found, jar)
    else:
        merged += ["--jars", _append_csv(defaults.get("spark.jars", ""), jar)]
    return with_conf_item(merged, LISTENERS_CONF, LISTENER_CLASS, defaults)


# Settings that hold a list, and their separator (a class path's is the platform's).
_LIST_SEPARATORS = {EXECUTOR_CLASS_PATH_CONF: os.pathsep}


def with_conf_item(options: list[str], key: str, value: str, defaults: dict[str, str]) -> list[str]:
    """The options with ``value`` appended to the list setting ``key``, after what the user set
    there on the command line or in the properties file."""
    merged = list(options)
    separator = _LIST_SEPARATORS.get(key, ",")
    found = _last_conf_value(merged, key)
    if found is not None:
        _append_at(merged, found, value, separator)
    else:
        merged += ["--conf", f"{key}={_append_csv(defaults.get(key, ''), value, separator)}"]
    return merged


def _append_csv(text: str, value: str, separator: str = ",") -> str:
    """A list (comma-separated unless told) with ``value`` appended, once."""
    items = [item.strip() for item in text.split(separator) if item.strip()]
    return separator.join(items if value in items else [*items, value])


def _append_at(options: list[str], found: tuple[int, int], value: str, separator: str = ",") -> None:
    """Append to the list held in ``options[index][offset:]``."""
    index, offset = found
    options[index] = options[index][:offset] + _append_csv(options[index][offset:], value, separator)


def _last_option_value(options: list[str], name: str) -> tuple[int, int] | None:
    """Where the last value of an option is: (item index, offset in the item)."""
    found = None
    for index, item in enumerate(options):
        if item == name and index + 1 < len(options):
            found = (index + 1, 0)
        elif item.startswith(name + "="):
            found = (index, len(name) + 1)
    return found


def _last_conf_value(options: list[str], key: str) -> tuple[int, int] | None:
    """Where the value of the last ``--conf key=value`` (or ``-c``, ``--conf=``) is."""
    found = None
    for index, item in enumerate(options):
        if item in ("--conf", "-c") and index + 1 < len(options):
            name, sep, _ = options[index + 1].partition("=")
            if sep and name.strip() == key:
                found = (index + 1, len(name) + 1)
        elif item.startswith("--conf="):
            name, sep, _ = item[len("--conf=") :].partition("=")
            if sep and name.strip() == key:
                found = (index, len("--conf=") + len(name) + 1)
    return found


def defaults_files(parsed: SubmitArgs, spark_submit: str) -> list[str]:
    """The properties files this spark-submit command line reads its defaults from."""
    return spark_defaults.files(
        parsed.option("--properties-file"), "--load-spark-defaults" in parsed.options, spark_submit
    )


def with_default_master(parsed: SubmitArgs, spark_submit: str) -> SubmitArgs:
    """``parsed`` knowing the master spark-submit will take, when its options give none (so that
    what depends on the master, such as keeping shuffle map outputs, decides on that one)."""
    if parsed.master is not None or parsed.master_unknown:
        return parsed  # decided already (handoff): no second read of the defaults files
    return replace(parsed, default_master=spark_defaults.master(defaults_files(parsed, spark_submit))[0])


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
