"""What the benchmarks in scripts/ share: how they launch Spark, time it, and print figures.

Every benchmark runs from a checkout set up with ``bash scripts/setup.sh`` as
``.venv/bin/python scripts/bench_<name>.py``, prints what it measured, and exits 0 whatever the
figures: a missed goal is reported, not raised.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
APPS = os.path.join(HERE, "bench_apps")
QUIET_LOG4J = os.path.join(REPO, "sparkrecover", "demo", "log4j2.properties")
# Two cores, as on the machines this project is measured on; Spark's own logs kept quiet.
SPARK_OPTIONS = [
    "--master",
    "local[2]",
    "--conf",
    "spark.ui.enabled=false",
    "--driver-java-options",
    f"-Dlog4j2.configurationFile={QUIET_LOG4J}",
]


def spark_submit() -> str:
    from sparkrecover.launch.launcher import find_spark_submit

    return find_spark_submit()


def warm_jar() -> None:
    """Build the JVM classes' jar before anything is timed: the first submit after a change to
    sparkrecover/jvm compiles it (seconds of javac), which no user's second run pays."""
    from sparkrecover.launch.jvm_files.listener_jar import ensure_jar

    ensure_jar(spark_submit())


def plain_env() -> dict[str, str]:
    """Plain spark-submit with the Python that sparkrecover would use for the driver and workers."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def sparkrecover(*args: str) -> list[str]:
    return [sys.executable, "-m", "sparkrecover", *args]


def timed(command: list[str], log: str, env: dict[str, str] | None = None) -> float:
    """Wall time of a command, its output appended to ``log``; a failure stops the benchmark."""
    return timed_cpu(command, log, env)[0]


def timed_cpu(command: list[str], log: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall time, CPU time of the whole process tree: JVM, driver and workers). On a machine
    shared with other work the CPU time moves less than the wall time."""
    with open(log, "ab") as handle:
        handle.write(f"\n$ {' '.join(command)}\n".encode())
        handle.flush()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"benchmark step failed (exit {done.returncode}): {' '.join(command)}; see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "MISSED"


def load_note() -> str:
    """The machine's load when the figures were taken: on a shared machine it explains noise."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return ""
    return f"(load average {one:.1f}/{five:.1f} on {os.cpu_count()} cores)"
