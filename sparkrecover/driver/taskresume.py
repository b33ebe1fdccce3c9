"""Task-level resume inside one implicit write (docs/design.md §4a): which partitions an unfinished
write keeps, setting their committed task folders aside, and running the write so that only the
other partitions are computed.

The protocol, step by step (docs/decisions.md lists what a crash between any two leaves):
1. ``prepare``, before anything of the target is cleaned: the partitions the plan keeps (journal)
   that still have exactly one usable committed task folder (committer evidence) are renamed into
   the hidden ``kept`` folder beside the target; folders of other partitions stay where they are
   and die with the cleanup. Found again there by the next resume if this attempt dies too.
2. ``write.started`` names the partition count, the write's shape and the kept partitions.
3. ``run``: the writer is pointed at the same rows through ``KeptPartitionsRDD`` (kept partitions
   empty, never computed) and, when something is kept, ``ResumingCommitProtocol`` brings the kept
   folders into the job's ``_temporary/0`` at job setup, so FileOutputCommitter's own job commit
   merges them before ``_SUCCESS``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core import kept_partitions, staleness
from sparkrecover.driver import hooks, partitions
from sparkrecover.journal import events as ev
from sparkrecover.jvm import KEPT_PROPERTY
from sparkrecover.kinds import Verdict
from sparkrecover.rundir import storage, taskfiles
from sparkrecover.rundir.plans import KeptTasks, PlanEntry


@dataclass
class TaskPlan:
    shape: partitions.WriteShape
    reason: str | None  # why nothing can be kept (None: partitions are reusable)
    kept: list[int] = field(default_factory=list)
    kept_dir: str | None = None  # local folder of the set-aside task folders

    @property
    def reusable(self) -> bool:
        return self.reason is None


# The partition specs a write.started lists in full up to this many characters (a digest always).
SPECS_JOURNALED = 20_000


@dataclass
class Target:
    """One write as task-level resume sees it."""

    frame: Any  # the DataFrame written
    spark: Any
    url: str  # fsspec URL of the output folder
    spark_path: str  # the same as Spark names it
    mode: str  # the save mode
    format: str | None  # None: the session's default source


@dataclass
class ExpectedWrite:
    """The write a declared stage with one output is expected to make to it."""

    stage: str
    entry: PlanEntry  # the stage's plan entry
    url: str
    spark_path: str


def target_of(write: Any) -> Target | None:
    """The target of an implicit write, or None where task-level resume does not apply (a
    table or a sink: no output folder of ours to keep tasks in)."""
    if write.writer is None or not write.url or not write.spark_path or write.table is not None:
        return None
    return Target(write.frame, write.spark, write.url, write.spark_path, write.mode, write.format)


def set_aside(url: str, entry: PlanEntry) -> None:
    """Step 1 for a ``continue`` decision: move the kept partitions' committed task folders out of
    the target, before anything cleans it. The write checks them against its shape later."""
    tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
    kept_dir = taskfiles.kept_dir(url)
    if tasks and kept_dir:
        try:
            _set_aside(url, kept_dir, set(tasks.kept), set(tasks.empty))
        except OSError as error:  # what was not moved is computed again: slower, never wrong
            print(f"sparkrecover: warning: committed tasks of {url} not kept: {error}", file=sys.stderr)


def plan_write(target: Target | None, entry: PlanEntry) -> TaskPlan | None:
    """What this write keeps (of what ``set_aside`` moved), and whether its partitions can be
    kept at all; None where task-level resume does not apply (no local output folder)."""
    if target is None or not storage.is_local(target.url):
        return None
    try:
        reason = _unsupported(target)
        shape = partitions.WriteShape(0, False, reason) if reason is not None else partitions.shape_of(target.frame)
    except Exception as error:  # probing must never break the write: it runs whole
        reason = f"its partitions could not be probed ({type(error).__name__}: {error})"
        shape = partitions.WriteShape(0, False, reason)
    if shape.reusable:
        # The script's own code is part of what partition i holds (a UDF's body does not show in
        # the plan): an edited script keeps no partition of an earlier attempt (§4 rule 5).
        script = staleness.script_digest(sys.argv[0], storage.read_bytes)  # as the bootstrap set it
        shape.digest = hashlib.sha256(f"{shape.digest}\n{script}".encode()).hexdigest()[:32]
    plan = TaskPlan(shape, reason if reason is not None else (None if shape.reusable else shape.reason))
    tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
    kept_dir = taskfiles.kept_dir(target.url)
    if tasks and plan.reusable and kept_dir and os.path.isdir(kept_dir):
        changed = _changed(tasks, shape)
        if changed is not None:
            plan.reason = changed
        else:
            folders = taskfiles.task_folders(target.url)
            set_aside = [p for p, found in folders.items() if any(os.path.dirname(f.path) == kept_dir for f in found)]
            plan.kept = kept_partitions.agreed(tasks.kept, set_aside)
            plan.kept_dir = storage.to_spark_path(kept_dir) if plan.kept else None
    if not plan.kept and kept_dir and os.path.isdir(kept_dir):
        _remove(kept_dir)  # set aside by an attempt whose partitions are not reused now
    return plan


def _changed(tasks: KeptTasks, shape: partitions.WriteShape) -> str | None:
    """Why partition i of this attempt is not partition i of the attempt that committed the kept
    tasks, or None. Adaptive execution chooses post-shuffle partitions from map-output sizes, and a
    range partitioning's bounds come from a seeded sample, neither of which need repeat: they are
    compared first, to say so."""
    if kept_partitions.same_partitions(
        tasks.shape, tasks.partitions, shape.digest, shape.partitions, now_reusable=shape.reusable
    ):
        return None
    if tasks.specs != shape.specs_digest:
        return (
            "the post-shuffle partitions differ from the attempt that committed them (adaptive "
            "execution coalesces and splits them from map-output sizes; a range partitioning samples "
            f"its bounds): {tasks.partitions} partitions then, {shape.partitions} now"
        )
    return "its partitions changed since the attempt that committed them (input slices, count or the script's code)"


def _unsupported(target: Target) -> str | None:
    spark = target.spark
    fmt = (target.format or spark.conf.get("spark.sql.sources.default", "parquet")).lower()
    if fmt not in hooks.FILE_FORMATS:
        return f"the {fmt} format does not commit through task folders"
    return partitions.unsupported_reason(spark, target.spark_path, mode=target.mode, frame=target.frame)


def prepare(target: Target | None, entry: PlanEntry) -> TaskPlan | None:
    """Both steps, for a write whose DataFrame is known before its target is cleaned."""
    if target is not None and storage.is_local(target.url):
        set_aside(target.url, entry)
    return plan_write(target, entry)


def _set_aside(url: str, kept_dir: str, wanted: set[int], empty_ok: set[int]) -> None:
    folders = taskfiles.task_folders(url)
    if taskfiles.job_commit_began(url, folders):
        _remove(kept_dir)
        return
    usable = taskfiles.usable(folders, empty_ok)
    chosen = {p: usable[p] for p in kept_partitions.agreed(wanted, usable)}
    os.makedirs(kept_dir, exist_ok=True)
    for folder in chosen.values():
        target = os.path.join(kept_dir, os.path.basename(folder.path))
        if os.path.dirname(folder.path) != kept_dir:
            os.replace(folder.path, target)  # one atomic rename per task: a crash loses nothing
    for partition, candidates in folders.items():  # what is not kept must not be merged later
        for folder in candidates:
            if os.path.dirname(folder.path) == kept_dir and chosen.get(partition) is not folder:
                _remove(folder.path)


def _remove(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def started(rt: Any, name: str, target: Target, plan: TaskPlan) -> None:
    staging = storage.join(target.url, "_temporary", "0")
    rt.writer.emit(
        ev.WRITE_STARTED,
        stage=name,
        partitions=plan.shape.partitions,
        staging=staging,
        shape=plan.shape.digest,
        # Whether this attempt's partitions can be kept by a later one; ``reason`` says why this
        # one keeps none (its shape, or a fallback from an earlier attempt's).
        reusable=plan.shape.reusable,
        reason=plan.reason,
        kept=plan.kept,
        specs=plan.shape.specs_digest,
        partition_specs=plan.shape.specs if sum(map(len, plan.shape.specs)) <= SPECS_JOURNALED else None,
    )


def run(target: Target, plan: TaskPlan, writer: Any, do_write: Callable[[], Any]) -> Any:
    """The write through the partition wrapper (every attempt, so partition *i* means the same
    rows), under the resuming commit protocol when partitions are kept. ``writer`` is the
    DataFrameWriter ``do_write`` saves through. A write whose query the probe ran (its shuffles'
    map stages computed) goes through the wrapper too, kept or not, reusable or not: the user's
    writer would plan the query again and run those stages a second time."""
    if not plan.reusable and not plan.shape.executed:
        return do_write()
    frame = partitions.without_partitions(target.frame, plan.kept)
    _point_writer_at(writer, frame)
    if not plan.kept:
        return do_write()
    sc = target.spark.sparkContext
    before = sc.getLocalProperty(KEPT_PROPERTY)
    # The kept partitions' tasks run empty: the listener journals no commit for them.
    sc.setLocalProperty(KEPT_PROPERTY, ",".join(map(str, plan.kept)))
    try:
        with partitions.resuming_commit(target.spark, plan.kept_dir, plan.kept):
            result = do_write()
    finally:
        sc.setLocalProperty(KEPT_PROPERTY, before)
    _remove(taskfiles.kept_dir(target.url) or "")
    return result


def _point_writer_at(writer: Any, frame: Any) -> None:
    """Make the user's writer (its mode, format, options, partitioning as they set them) write
    ``frame`` instead: its JVM object's Dataset fields are swapped through Java reflection (one,
    ``df``, in both Spark 3.5's DataFrameWriter and 4.x's classic one; 3.5 keeps no ``ds`` field)."""
    jwrite = writer._jwrite
    jdf = frame._jdf
    dataset_class = jdf.getClass()
    cls = jwrite.getClass()
    swapped = 0
    while cls is not None:
        for declared in cls.getDeclaredFields():
            if declared.getType().isAssignableFrom(dataset_class):
                declared.setAccessible(True)
                declared.set(jwrite, jdf)
                swapped += 1
        cls = cls.getSuperclass()
    if not swapped:
        raise RuntimeError("this Spark's DataFrameWriter has no Dataset field to point at the kept partitions")
