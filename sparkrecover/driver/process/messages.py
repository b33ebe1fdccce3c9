"""Where the driver's own lines (``sparkrecover: …``) go: spark-submit's stderr, not the
application's stdout.

Spark's PythonRunner starts the Python driver with its stderr merged into its stdout and copies
both to the JVM's stdout, so a plain ``print(…, file=sys.stderr)`` lands among the lines the
script prints. A driver a launcher runs (``spark-submit-args``' line) said "this driver resumes it
as attempt 2" on the program's stdout, which then differed from a plain run's (found on a public
ETL script run again by its own command). Under PythonRunner (``PYSPARK_GATEWAY_PORT`` set: the
JVM that started us listens for pyspark) the lines are printed by that JVM's ``System.err``, through
the gateway pyspark opens for the script anyway (opened here if the script has not yet). Reopening
the JVM's stderr through ``/proc`` was tried and lost lines: a JVM writing a regular file at its own
offset overwrites what another open appended. Anywhere else, or when the JVM cannot be reached (a
driver on its way out after the JVM died), the lines go to ``sys.stderr`` as before. The script's
own stderr is untouched: it still reaches stdout, as in a plain run.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def _jvm_stderr() -> Any | None:
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkContext

    # What SparkContext() does first: connect to the JVM that started this process (no new JVM,
    # no context); the script's SparkContext then finds the gateway made.
    SparkContext._ensure_initialized()
    return SparkContext._jvm.System.err  # type: ignore[union-attr]


def say(line: str, through_jvm: bool = True) -> None:
    """Write ``line`` (already prefixed ``sparkrecover: …``) where the driver's messages go. A
    closed pipe (a JVM already gone) must not stop the driver: the line is dropped. A driver
    stopped by a signal says its last lines with ``through_jvm=False``: its JVM is shutting down
    too, and a call into it must not hold up the journal's last records."""
    try:
        err = _jvm_stderr() if through_jvm else None
        if err is not None:
            err.println(line)
            return
    except Exception:  # the JVM is gone or unreachable: say it where Python can
        pass
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
