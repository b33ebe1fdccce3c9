"""The driver's log4j2 configuration under ``submit`` and ``resume`` when the user gave none:
Spark's INFO lines off the terminal (docs/cli-output.md, "Spark's own log"). The one harmless
ERROR a reused map stage makes Spark log is dropped in the driver whatever its configuration
(driver/process/log_filter.py)."""

from __future__ import annotations

import glob
import os

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-log4j2.properties")


def user_configured(driver_java_options: str, env: dict[str, str]) -> bool:
    """Whether the user chose the driver's logging: a log4j setting among the driver's Java
    options or in ``SPARK_SUBMIT_OPTS``, or a ``log4j2.*`` file in Spark's conf folder."""
    if "log4j" in driver_java_options or "log4j" in env.get("SPARK_SUBMIT_OPTS", ""):
        return True
    conf = env.get("SPARK_CONF_DIR") or (os.path.join(env["SPARK_HOME"], "conf") if env.get("SPARK_HOME") else None)
    return bool(conf and glob.glob(os.path.join(glob.escape(conf), "log4j2*")))


def with_quiet_driver_log(env: dict[str, str]) -> None:
    """Hand the driver JVM (spark-submit's own, in client mode) sparkrecover's configuration."""
    given = env.get("SPARK_SUBMIT_OPTS", "")
    env["SPARK_SUBMIT_OPTS"] = (given + " " if given else "") + f"-Dlog4j2.configurationFile={CONFIG}"
