"""The driver's Java options and class path as spark-submit takes them, and Java options added to
the user's rather than put in their place.

spark-submit's launcher keeps the last of ``--driver-java-options X`` and ``--conf
spark.driver.extraJavaOptions=X`` on the command line (both write the same setting), and only
when neither is there the properties file's value; ``--driver-class-path`` likewise.
"""

from __future__ import annotations

from sparkrecover.launch import spark_defaults

JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"
JAVA_OPTIONS_OPTION = "--driver-java-options"
CLASS_PATH_CONF = "spark.driver.extraClassPath"
CLASS_PATH_OPTION = "--driver-class-path"


def _last(options: list[str], key: str, option: str) -> tuple[int, int] | None:
    """Where the value of the last ``option X``, ``option=X`` or ``--conf key=X`` (``-c``,
    ``--conf=``) is: (item index, offset of the value in the item)."""
    found = None
    for index, item in enumerate(options):
        following = options[index + 1] if index + 1 < len(options) else None
        if item == option and following is not None:
            found = (index + 1, 0)
        elif item.startswith(option + "="):
            found = (index, len(option) + 1)
        elif item in ("--conf", "-c") and following is not None:
            name, sep, _ = following.partition("=")
            if sep and name.strip() == key:
                found = (index + 1, len(name) + 1)
        elif item.startswith("--conf="):
            name, sep, _ = item[len("--conf=") :].partition("=")
            if sep and name.strip() == key:
                found = (index, len("--conf=") + len(name) + 1)
    return found


def driver_setting(options: list[str], defaults: list[str], key: str, option: str) -> str:
    """The value spark-submit will take for a driver setting: the command line's last, else the
    properties files' (``defaults``, as ``launcher.defaults_files`` lists them), else ""."""
    found = _last(options, key, option)
    if found is not None:
        index, offset = found
        return options[index][offset:]
    return spark_defaults.setting(defaults, key) or ""


def with_java_options(options: list[str], defaults: list[str], extra: str) -> list[str]:
    """The options with ``extra`` added after the driver's Java options the user gave, wherever
    they gave them (the command line's last, or the properties file's, which a value on the
    command line would otherwise hide)."""
    merged = list(options)
    found = _last(merged, JAVA_OPTIONS_CONF, JAVA_OPTIONS_OPTION)
    if found is not None:
        index, offset = found
        given = merged[index][offset:]
        merged[index] = merged[index][:offset] + (f"{given} {extra}" if given.strip() else extra)
        return merged
    given = spark_defaults.setting(defaults, JAVA_OPTIONS_CONF) or ""
    return [*merged, JAVA_OPTIONS_OPTION, f"{given} {extra}" if given.strip() else extra]
