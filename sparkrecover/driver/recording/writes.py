"""Implicit stages (zero-code mode): one terminal DataFrame write, recorded and replayed like a stage.

``zerocode`` turns a ``DataFrameWriter``/``DataFrameWriterV2`` call into a ``Write``; ``run``
journals it, skips it on resume when the plan says so (the call then does nothing), and before
it runs again removes what an earlier attempt's write left behind, so an append lands exactly
once (docs/design.md §4 rule 2).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sparkrecover.driver.lifecycle import fingerprints, stages
from sparkrecover.driver.process import runtime
from sparkrecover.driver.recording import tables
from sparkrecover.driver.tasks import taskresume
from sparkrecover.rundir import manifests, storage
from sparkrecover.rundir.plans import Committed, PlanEntry

# How a write treats what its target held: append adds to it, create needs it absent
# (errorifexists, ignore, V2 create), overwrite replaces it (or the rows/partitions it names).
APPEND, CREATE, OVERWRITE = "append", "create", "overwrite"
# The mode (the name's kind) of a SQL DROP TABLE stage: skipped, it takes the table out of the
# catalog again (files untouched) instead of registering it.
DROP = "drop"
# Spark's per-job folders inside a target: FileOutputCommitter's _temporary, which the next job's
# commit would merge into the output (the rows of a killed job would land twice), and the
# staging folders of dynamic partition overwrite.
_LEFTOVER_DIRS = ("_temporary",)
_STAGING_PREFIX = ".spark-staging-"


@dataclass
class Write:
    name: str  # the implicit stage's name
    call_site: str  # "file:line" of the user's call
    ordinal: int  # 1 for the first write of this target and mode at this call site
    mode: str  # errorifexists, ignore, overwrite, append, or the V2 method name
    category: str  # APPEND, CREATE or OVERWRITE
    target: str  # a path, "table NAME" or "<format> sink", for people
    frame: Any  # the DataFrame being written
    spark: Any
    url: str | None = None  # fsspec URL of the data (a path, a table's location)
    spark_path: str | None = None
    table: str | None = None
    existed: bool = False  # the table (or, for a path, the folder) was there before
    writer: Any = None  # the user's DataFrameWriter (task-level resume re-points it)
    format: str | None = None  # a path write's format (None: the session's default source)

    @property
    def verifiable(self) -> bool:
        return self.url is not None


def run(rt: runtime.Runtime, write: Write, do_write: Callable[[], Any]) -> Any:
    """The write as a stage; None when the plan skips it (the call then does nothing)."""
    return stages.run(rt, WriteStage(rt, write, do_write))


class WriteStage:
    """An implicit write as the stage lifecycle sees it: its target may be a table, which a skip
    registers again and a catalog that outlives the driver may have moved; an earlier attempt's
    rows are removed before it runs again, so an append lands exactly once."""

    kind = "write"

    def __init__(self, rt: runtime.Runtime, write: Write, do_write: Callable[[], Any]):
        self.rt, self.write, self.do_write = rt, write, do_write
        self.name, self.spark = write.name, write.spark
        self.version: str | None = None  # an implicit write has no version= of its own
        self.target: taskresume.Target | None = None
        self.tasks: taskresume.TaskPlan | None = None
        self.before: dict[str, Any] | None = None
        self.moved: str | None = None

    def outputs(self) -> list[str]:
        return [self.write.url] if self.write.url else []

    def reads(self) -> tuple[Any, Any, list[str]]:
        write, rt = self.write, self.rt
        files = _input_files(write.frame)
        previous = rt.producers.get(write.url) if write.url else None
        if previous is not None and previous != write.name and previous in rt.reached and write.spark_path:
            # An earlier stage of this attempt wrote this target (a table created, then inserted
            # into): this write depends on it, so it runs again whenever that one does.
            files.append(write.spark_path)
        return None, write.frame, files

    def skip_problem(self, entry: PlanEntry) -> str | None:
        committed = entry.committed
        if committed is None:
            return None
        self.moved = _moved_table(self.write, committed)
        return self.moved or _catalog_problem(self.write, committed)

    def skipped(self, entry: PlanEntry, lost: bool) -> Any:
        if not (lost and self.write.mode == DROP):
            _restore_table(self.write, entry.committed)  # the script may read it next
        return None

    def invalidated(self, entry: PlanEntry, reason: str) -> PlanEntry:
        if self.moved is not None:
            # The recorded files are not the table's any more: undoing them would touch data the
            # script no longer reads. The write runs on the table as a plain run would.
            return replace(entry, restore=[])
        return entry

    def set_aside(self, entry: PlanEntry) -> taskresume.TaskPlan | None:
        # Committed task folders are set aside before the cleaning removes the dead attempt's _temporary.
        self.target = taskresume.target_of(self.write)
        self.tasks = taskresume.prepare(self.target, entry)
        return self.tasks

    def clean(self, entry: PlanEntry) -> dict[str, Any]:
        write = self.write
        in_place = self.tasks is not None and self.tasks.in_place
        cleaned = undo_previous(self.rt, entry, write, spare_committed_tasks=in_place)
        self.before = snapshot(write, self.rt.writer.attempt)
        extra = {
            "before": [self.before] if self.before else [],
            "call_site": write.call_site,
            "ordinal": write.ordinal,
            "target": write.target,
            "mode": write.mode,
            "verifiable": write.verifiable,
            "cleaned": cleaned[:100],
        }
        if self.target is None:  # task-level resume does not apply: a resume says why it keeps nothing
            extra["whole"] = taskresume.whole_reason(write)
        return extra

    def execute(self, tasks: taskresume.TaskPlan | None) -> Any:
        if tasks is not None and self.target is not None:
            taskresume.journal_write_started(self.rt, self.name, self.target, tasks)
            return taskresume.run(self.target, tasks, self.write.writer, self.do_write)
        return self.do_write()

    def committed(self) -> tuple[stages.Outputs, dict[str, Any], list[dict[str, Any]] | None]:
        write = self.write
        outputs: stages.Outputs = [(write.url, write.spark_path)] if write.url else []
        extra: dict[str, Any] = {}
        recorded = tables.describe(write.spark, write.table) if write.table is not None else None
        if recorded is not None:
            # A new table's location is Spark's choice: read it back now that the table exists.
            # (A dropped table has none: its output stays the location it had.)
            location = recorded["location"]
            outputs = [(storage.from_spark_path(location), location)]
            extra = {"format": recorded["provider"], "schema": recorded["schema"], "table": recorded}
        added_since = [self.before] if write.category == APPEND and self.before else None
        return outputs, extra, added_since


def _input_files(frame: Any) -> list[str]:
    try:
        return fingerprints.input_files(frame)
    except Exception:
        return []


def table_info(spark: Any, name: str) -> tuple[bool, str | None, str | None]:
    """(whether the table exists, the Spark path of its data or None, its provider).

    A table that does not exist yet gets the location Spark's session catalog will give a new
    managed table (``<database location>/<table>``); a table of another catalog, or a view, has
    no location we can check.
    """
    try:
        if spark.catalog.tableExists(name):
            rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
            info = {str(row[0]).strip(): row[1] for row in rows}
            return True, info.get("Location") or None, (info.get("Provider") or None)
        parts = [part.strip("`") for part in name.split(".")]
        if len(parts) > 3 or (len(parts) == 3 and parts[0].lower() != "spark_catalog"):
            return False, None, None
        if len(parts) == 1 and spark.catalog.currentCatalog() != "spark_catalog":
            return False, None, None
        database = parts[-2] if len(parts) > 1 else spark.catalog.currentDatabase()
        location = spark.catalog.getDatabase(database).locationUri
        return False, location.rstrip("/") + "/" + parts[-1].lower(), None
    except Exception:
        return False, None, None


def snapshot(write: Write, attempt: int) -> dict[str, Any] | None:
    """What the target holds before the write: all of it for an append (to restore it), only
    whether it exists otherwise (a listing of a large overwritten folder would be wasted)."""
    if not write.url:
        return None
    if write.category == APPEND:
        before = manifests.build_output(write.url, write.spark_path)
    else:
        before = {"path": write.url, "spark_path": write.spark_path}
    before.update(category=write.category, existed=write.existed, attempt=attempt)
    if write.table is not None:
        before["table"] = write.table
    return before


def undo_previous(
    rt: runtime.Runtime, entry: PlanEntry, write: Write, spare_committed_tasks: bool = False
) -> list[str]:
    """Bring the target back to what it held before this write first ran in this run, so that
    running it again leaves its rows there once. Returns what was removed. With
    ``spare_committed_tasks`` the committer's ``_temporary`` stays: the committed task folders the
    write keeps in place are there (and only they: ``taskresume.set_aside`` removed the rest)."""
    committed = entry.committed
    removed: list[str] = []
    for before in entry.restore:
        url = before.get("path")
        if not url:
            continue
        category = before.get("category")
        if category != OVERWRITE and not before.get("existed"):
            if spare_committed_tasks and before.get("table") is None:
                # Created by this write, whose kept task folders wait in its _temporary (an append
                # on an object store): all the rest goes (files a dead job commit merged), they stay.
                removed += _remove_all_but_temporary(url)
                continue
            # It was created by this write: remove all of it (a table from the catalog too), or
            # errorifexists would fail and ignore would silently keep a half-written target.
            removed += _remove_target(write.spark, url, before.get("table"))
            continue
        if category == APPEND:
            if committed is not None and committed.attempt >= before.get("attempt", 0):
                added = _added_by(rt, committed, url)
                removed += _remove(url, added) if added is not None else manifests.restore_output(before)
            else:
                removed += manifests.restore_output(before)
        removed += remove_leftovers(url, spare_committed_tasks)
    return removed


def _added_by(rt: runtime.Runtime, committed: Committed, url: str) -> list[str] | None:
    """The files a committed append added to ``url``, from its manifest; None if unknown."""
    for output in manifests.load_manifest(committed.manifest_record(), rt.run_dir) or []:
        if output.get("path") == url and output.get("scope") == "added" and "files" in output:
            return [entry[0] for entry in output["files"]]
    return None


def _remove(url: str, names: list[str]) -> list[str]:
    removed = []
    for name in names:
        target = storage.join(url, name) if name else url
        if storage.data_exists(target):
            fs, path = storage.data_filesystem(target)
            fs.rm(path)
            removed.append(target)
    return removed


def _remove_target(spark: Any, url: str, table: str | None) -> list[str]:
    removed = []
    if table is not None and spark.catalog.tableExists(table):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        removed.append(f"table {table}")
    if storage.data_exists(url):
        if storage.is_local(url):
            shutil.rmtree(storage.normalize(url), ignore_errors=True)
        else:
            fs, path = storage.data_filesystem(url)
            fs.rm(path, recursive=True)
        removed.append(url)
    return removed


def _remove_all_but_temporary(url: str) -> list[str]:
    """Remove every entry of the target ``url`` but its committer's ``_temporary`` (and the magic
    committer's ``__magic`` folders)."""
    if not storage.data_exists(url):
        return []
    fs, path = storage.data_filesystem(url)
    removed = []
    for entry in fs.ls(path, detail=False):
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        if name != "_temporary" and not name.startswith("__magic"):
            fs.rm(entry, recursive=True)
            removed.append(storage.join(url, name))
    return removed


def remove_leftovers(url: str, spare_committed_tasks: bool = False) -> list[str]:
    """Remove a killed job's _temporary and staging folders, and checksum files whose data file
    was removed (Spark ignores them, people counting files do not)."""
    removed = []
    if not storage.is_local(url):
        fs, path = storage.data_filesystem(url)
        for name in () if spare_committed_tasks else _LEFTOVER_DIRS:
            leftover = path.rstrip("/") + "/" + name
            if fs.exists(leftover):
                fs.rm(leftover, recursive=True)
                removed.append(storage.join(url, name))
        return removed
    root = storage.normalize(url)
    if not os.path.isdir(root):
        return removed
    for name in os.listdir(root):
        if name in _LEFTOVER_DIRS and spare_committed_tasks:
            continue  # the committed tasks a resumed write keeps in place (the manifest committer's)
        if name in _LEFTOVER_DIRS or name.startswith(_STAGING_PREFIX):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            removed.append(os.path.join(root, name))
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            if name.startswith(".") and name.endswith(".crc") and name[1:-4] not in names:
                os.remove(os.path.join(folder, name))
                removed.append(os.path.join(folder, name))
    return removed


def _moved_table(write: Write, committed: Committed) -> str | None:
    """Why a committed table write cannot be skipped although its files are intact, or None.

    A catalog that outlives the driver (Hive's metastore) still has the table on resume: the
    write is skipped only if the catalog puts it where the commit recorded it. Elsewhere (a table
    dropped and created again, ``ALTER TABLE … SET LOCATION``), the files the planner checked are
    not the ones the script will read.
    """
    paths = committed.paths
    if write.table is None or write.mode == DROP or not write.existed or write.url is None or not paths:
        return None  # no catalog entry to check (without Hive support one is registered again)
    if storage.from_spark_path(paths[0]) == write.url:
        return None
    return f"the catalog has table {write.table} at {write.spark_path}, not at {paths[0]} where it was committed"


def _restore_table(write: Write, committed: Committed | None) -> None:
    """A skipped or lost table write leaves its table as the uninterrupted run would have
    (driver/recording/tables.py), even one a later DROP of the run removed: the script may read it before
    it gets there. A skipped DROP then takes it out of the catalog again, files untouched (what
    is at its location now belongs to whatever the run did after the drop)."""
    if write.table is None:
        return
    if write.mode == DROP:
        tables.forget(write.spark, write.table)
    elif committed is not None:
        tables.register(write.spark, write.table, committed)


def _catalog_problem(write: Write, committed: Committed) -> str | None:
    """With Hive support the catalog survives the driver: a skipped table write must find its
    table there, at the location it recorded; otherwise it is not finished and runs again."""
    if write.table is None or write.mode == DROP or committed.superseded_by:
        return None
    if not tables.hive(write.spark):
        return None
    paths = committed.paths
    return tables.catalog_problem(write.spark, write.table, paths[0] if paths else None)
