"""spark-submit's arguments: split into its options, the application and the application's
arguments (``SubmitArgs``), checked before anything starts, and edited (a listener, a conf item,
the master spark-submit would take). Nothing here runs a process: ``launcher.py`` does."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, replace

from sparkrecover.errors import UsageError
from sparkrecover.jvm import EXECUTOR_CLASS_PATH_CONF, LISTENER_CLASS, LISTENERS_CONF
from sparkrecover.launch import spark_defaults

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


def merge_list_option(options: list[str], name: str, value: str) -> list[str]:
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
