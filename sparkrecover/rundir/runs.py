"""Runs on storage: ids, run directories and their layout, finding them again."""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass

from sparkrecover.errors import UsageError
from sparkrecover.rundir import storage

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# The run directory's layout (docs/design.md §5): the journal's segments and the plans each have a folder.
JOURNAL_DIR = "journal"
PLANS_DIR = "plans"


def new_run_id(app: str) -> str:
    """Sortable and readable: ``20261122-031500-etl-3fa2``."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", os.path.splitext(os.path.basename(app))[0]).strip("-")[:40]
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{stem or 'app'}-{secrets.token_hex(2)}"


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-' (at most 128)")
    return run_id


@dataclass(frozen=True)
class Run:
    """One run, as one value: its id and where it lives (its run directory's URL, on any store
    ``storage`` serves). Both processes pass it whole, never the id and the folder apart."""

    id: str
    dir: str

    @classmethod
    def under(cls, root: str, run_id: str) -> Run:
        """The run ``run_id`` under the root (the id checked)."""
        return cls(run_id, run_dir_of(root, run_id))

    def plan_url(self, attempt: int) -> str:
        return plan_url(self.dir, attempt)

    def has_journal(self) -> bool:
        return has_journal(self.dir)


def run_dir_of(root: str, run_id: str) -> str:
    return storage.join(root, check_run_id(run_id))


def plan_url(run_dir: str, attempt: int) -> str:
    return storage.join(run_dir, PLANS_DIR, f"{attempt:04d}.json")


def resolve_run(run: str, root: str) -> Run:
    """RUN is a run id under the root or the URL of a run directory (docs/design.md §8)."""
    if storage.scheme_of(run) or "/" in run or run.startswith("."):
        run_dir = storage.normalize(run)
        return Run(run_dir.rstrip("/").rsplit("/", 1)[-1], run_dir)
    return Run.under(root, run)


def has_journal(run_dir: str) -> bool:
    return storage.exists(storage.join(run_dir, JOURNAL_DIR))


def list_runs(root: str) -> list[Run]:
    """Every run under the root."""
    try:
        names = sorted(storage.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        if _RUN_ID.match(name):
            run_dir = storage.join(root, name)
            if has_journal(run_dir):
                found.append(Run(name, run_dir))
    return found
