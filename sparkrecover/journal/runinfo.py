"""What ``run.started`` and ``attempt.started`` record of where and by whom a run or an attempt was
started: the same fields whoever starts it, ``submit`` on the command line or a driver that a
launcher started with no command line around (``driver/process/which_attempt.py``). Arguments are redacted
(docs/design.md §4 rule 9)."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from sparkrecover.journal import redact
from sparkrecover.rundir import lease as leases
from sparkrecover.version import __version__

# Who started an attempt (attempt.started's started_by): a command, or a launcher that ran the
# driver's command line itself (YARN's next application attempt, a Kubernetes operator, an
# orchestrator's retry, `spark-submit $(sparkrecover spark-submit-args ...)`).
BY_SUBMIT, BY_RESUME, BY_LAUNCHER = "submit", "resume", "launcher"


def run_started(
    *,
    app: str,
    app_args: list[str],
    spark_submit_args: list[str],
    spark_submit: str | None,
    cwd: str,
    flush_interval: float,
    buffer_size: int,
    checksums: bool,
    checkpoint_root: str | None,
    keep_shuffles: str | None,
    started_by: str,
) -> dict[str, Any]:
    """The payload of ``run.started``."""
    return {
        "app": os.path.abspath(os.path.join(cwd, app)),
        "app_args": redact.redact_args(app_args),
        "spark_submit_args": redact.redact_args(spark_submit_args),
        "spark_submit": spark_submit,
        "cwd": cwd,
        "user": leases.user_name(),
        "host": socket.gethostname(),
        "flush_interval": flush_interval,
        "buffer_size": buffer_size,
        "checksums": checksums,
        "checkpoint_root": checkpoint_root,
        "keep_shuffles": keep_shuffles,
        "started_by": started_by,
        "versions": {"sparkrecover": __version__, "python": platform.python_version()},
    }


def attempt_started(command: list[str], started_by: str) -> dict[str, Any]:
    """The payload of ``attempt.started``: the process that started the attempt, and how."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": redact.redact_args(command),
        "started_by": started_by,
    }
