"""Where the driver's own lines (``sparkrecover: …``) go: spark-submit's stderr, not the
application's stdout.

Spark's PythonRunner starts the Python driver with its stderr merged into its stdout and copies
both to the JVM's stdout, so a plain ``print(…, file=sys.stderr)`` lands among the lines the
script prints. A driver a launcher runs (``spark-submit-args``' line) said "this driver resumes it
as attempt 2" on the program's stdout, which then differed from a plain run's (found on a public
ETL script run again by its own command). Under PythonRunner (``PYSPARK_GATEWAY_PORT`` set, the
JVM our parent) the lines go to the JVM's own stderr, reopened through ``/proc``; anywhere else, or
when that cannot be opened (not Linux, another user's process), to ``sys.stderr`` as before. The
script's own stderr is untouched: it still reaches stdout, as in a plain run.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

_stream: TextIO | None = None


def _open() -> TextIO:
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return sys.stderr
    try:
        return open(f"/proc/{os.getppid()}/fd/2", "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - kept open
    except OSError:
        return sys.stderr


def say(line: str) -> None:
    """Write ``line`` (already prefixed ``sparkrecover: …``) where the driver's messages go. A
    closed pipe (a JVM already gone) must not stop the driver: the line is dropped."""
    global _stream
    if _stream is None:
        _stream = _open()
    try:
        print(line, file=_stream, flush=True)
    except (OSError, ValueError):
        pass
