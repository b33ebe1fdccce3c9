"""What spark-submit reads from ``--properties-file`` or ``spark-defaults.conf`` that sparkrecover
must know before the launch: the list settings it appends to, and the master when the command line
names none."""

from __future__ import annotations

import os
import re

from sparkrecover.jvm import EXECUTOR_CLASS_PATH_CONF, LISTENERS_CONF, PLUGINS_CONF

LIST_SETTINGS = ("spark.jars", LISTENERS_CONF, PLUGINS_CONF, EXECUTOR_CLASS_PATH_CONF)


def files(properties_file: str | None, load_spark_defaults: bool, spark_submit: str) -> list[str]:
    """The properties files spark-submit reads its defaults from, the first one winning:
    ``--properties-file``, else (or also, with ``--load-spark-defaults``) ``spark-defaults.conf``."""
    found = []
    if properties_file:
        found.append(properties_file)
    if not properties_file or load_spark_defaults:
        home = os.environ.get("SPARK_HOME") or os.path.dirname(os.path.dirname(os.path.realpath(spark_submit)))
        conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(home, "conf")
        found.append(os.path.join(conf_dir, "spark-defaults.conf"))
    return found


def list_values(sources: list[str]) -> dict[str, str]:
    """The list settings sparkrecover appends to (``spark.jars``, ``spark.extraListeners``,
    ``spark.plugins``, ``spark.executor.extraClassPath``) as spark-submit would read them from
    ``--properties-file`` or ``spark-defaults.conf``."""
    values: dict[str, str] = {}
    for path in sources:
        for key, value in _read_properties(path).items():
            if key in LIST_SETTINGS:
                values.setdefault(key, value)  # --properties-file wins over spark-defaults.conf
    return values


def setting(sources: list[str], key: str) -> str | None:
    """One setting as spark-submit reads it from the properties files (the first that sets it)."""
    for path in sources:
        value = _read_properties(path).get(key)
        if value is not None:
            return value
    return None


def read_all(sources: list[str]) -> dict[str, str]:
    """Every setting of ``sources`` (``files``), the first file that sets a key winning."""
    values: dict[str, str] = {}
    for path in sources:
        for key, value in _read_properties(path).items():
            values.setdefault(key, value)
    return values


# spark-submit's master when neither the command line nor a defaults file names one.
SPARK_DEFAULT_MASTER = "local[*]"


def master(sources: list[str]) -> tuple[str, str | None]:
    """The master spark-submit takes when the options give none, and the file that named it:
    ``spark.master`` of the first of ``sources`` (``files``) that sets it, else ``local[*]`` (None)."""
    for path in sources:
        named = _read_properties(path).get("spark.master")
        if named:
            return named, path
    return SPARK_DEFAULT_MASTER, None


_PROPERTY = re.compile(r"^((?:[^\\=:\s]|\\.)+)\s*[=:\s]\s*(.*)$")


def _read_properties(path: str) -> dict[str, str]:
    """The simple ``key value`` / ``key=value`` lines of a Java properties file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    values = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = _PROPERTY.match(line)
        if match:
            values[match[1]] = match[2].strip()
    return values
