"""The run a scheduler's task runs as (``sparkrecover.airflow``; docs/launchers.md, "Airflow").

A task instance of a DAG run is one run of sparkrecover: every try of it (a retry, a clear) shares
the run id, so a try after a crash resumes and a try after success runs nothing; every DAG run has
its own, so a second DAG run on the same logical date computes again. ``recompute`` is the one way
to compute a task instance's finished run again: its next try starts a new generation of the run
(``<id>.r2``, ``.r3``, ...), while an unfinished generation is still resumed.

Nothing here imports Airflow: the operator hands in the ids and the connection's master.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from sparkrecover.planning.next_attempt import last_attempt_succeeded
from sparkrecover.rundir import runs

MAX_RUN_ID = 128  # rundir/runs.py
# Room kept for a generation's suffix (".r99") and a digest ("-1a2b3c4d").
_RESERVED = len(".r99") + len("-12345678")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def task_run_id(dag_id: str, dag_run_id: str, task_id: str, map_index: int = -1) -> str:
    """``<dag>.<dag run>.<task>`` (and ``.m<index>`` for a mapped task's instance) as a run id:
    readable, and unique: characters a run id cannot hold become ``-``, and when anything was
    changed or cut a digest of the exact ids is added, so two DAG runs never share a run."""
    exact = f"{dag_id}\0{dag_run_id}\0{task_id}\0{map_index}"
    parts = [dag_id, dag_run_id, task_id] + ([f"m{map_index}"] if map_index >= 0 else [])
    readable = ".".join(_UNSAFE.sub("-", part).strip("-.") or "x" for part in parts)
    if readable == ".".join(parts) and len(readable) <= MAX_RUN_ID - _RESERVED:
        return readable
    digest = hashlib.sha256(exact.encode()).hexdigest()[:8]
    return f"{readable[: MAX_RUN_ID - _RESERVED].rstrip('.-')}-{digest}"


def generation(run_id: str, number: int) -> str:
    return run_id if number <= 1 else f"{run_id}.r{number}"


def run_for_try(root: str, run_id: str, recompute: bool) -> tuple[str, str | None]:
    """The run this try runs as, and what to tell the log when ``recompute`` moved it on. Without
    ``recompute`` always ``run_id``. With it, the latest generation that exists, unless it succeeded:
    then the next one (a new run, every stage computed)."""
    if not recompute:
        return run_id, None
    number = 1
    while runs.Run.under(root, generation(run_id, number + 1)).has_journal():
        number += 1
    latest = generation(run_id, number)
    if not last_attempt_succeeded(runs.Run.under(root, latest)):
        return latest, None
    fresh = generation(run_id, number + 1)
    return fresh, f"run {latest} succeeded; recompute=True: this try computes it again as run {fresh}"


def submit_options(
    *,
    master: str,
    deploy_mode: str | None,
    conf: Mapping[str, object] | None,
    jars: str | None,
    py_files: str | None,
    files: str | None,
) -> list[str]:
    """The spark-submit options that shape the line ``spark-submit-args`` builds, from what the
    launcher itself passes: the master and deploy mode of its connection, and the user's conf and
    lists, which the listener's and the keeping settings are appended to."""
    options = ["--master", master]
    if deploy_mode:
        options += ["--deploy-mode", deploy_mode]
    for key, value in (conf or {}).items():
        options += ["--conf", f"{key}={value}"]
    for option, value in (("--jars", jars), ("--py-files", py_files), ("--files", files)):
        if value:
            options += [option, value]
    return options


def truthy(value: object) -> bool:
    """A templated flag: a bool, or the text a template renders it to."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)
