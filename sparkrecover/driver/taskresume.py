"""Task-level resume inside one implicit write (DESIGN §4a): which partitions an unfinished write
keeps, setting their committed task folders aside, and running the write so that only the other
partitions are computed.

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

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.driver import partitions
from sparkrecover.journal import events as ev
from sparkrecover.rundir import storage, taskfiles


@dataclass
class TaskPlan:
    shape: partitions.WriteShape
    reason: str | None                  # why nothing can be kept (None: partitions are reusable)
    kept: list[int] = field(default_factory=list)
    kept_dir: str | None = None         # local folder of the set-aside task folders

    @property
    def reusable(self) -> bool:
        return self.reason is None


# Formats Spark writes through FileFormatWriter and a commit protocol: the ones whose committed
# task folders can be kept. Others (delta, iceberg, jdbc, noop, ...) run their writes whole.
FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "text", "avro", "xml"})


@dataclass
class Target:
    """One write as task-level resume sees it."""

    frame: Any          # the DataFrame written
    spark: Any
    url: str            # fsspec URL of the output folder
    spark_path: str     # the same as Spark names it
    mode: str           # the save mode
    format: str | None  # None: the session's default source


def target_of(write: Any) -> Target | None:
    """The target of an implicit write, or None where task-level resume does not apply (a
    table or a sink: no output folder of ours to keep tasks in)."""
    if write.writer is None or not write.url or not write.spark_path or write.table is not None:
        return None
    fmt = getattr(write.writer, "_sr_format", None)
    return Target(write.frame, write.spark, write.url, write.spark_path, write.mode, fmt)


def prepare(target: Target | None, entry: dict[str, Any]) -> TaskPlan | None:
    """What this write keeps, with the kept folders set aside; None where task-level resume does
    not apply (no local or HDFS output folder)."""
    if target is None or not storage.is_local(target.url):
        return None
    frame, spark = target.frame, target.spark
    fmt = (target.format or spark.conf.get("spark.sql.sources.default", "parquet")).lower()
    reason = (None if fmt in FILE_FORMATS else f"the {fmt} format does not commit through task folders") or \
        partitions.unsupported_reason(spark, target.spark_path, mode=target.mode, frame=frame)
    if reason is not None:
        return TaskPlan(partitions.WriteShape(0, False, reason), reason)
    shape = partitions.shape_of(frame)
    plan = TaskPlan(shape, None if shape.reusable else shape.reason)
    tasks = entry.get("tasks") if entry.get("decision") == "continue" else None
    kept_dir = taskfiles.kept_dir(target.url)
    if tasks and plan.reusable and kept_dir:
        if tasks.get("shape") != shape.digest or tasks.get("partitions") != shape.partitions:
            plan.reason = "its partitions changed since the attempt that committed them (input slices or count)"
        else:
            plan.kept, plan.kept_dir = _set_aside(target.url, kept_dir, set(tasks.get("kept") or []))
    if not plan.kept and kept_dir and os.path.isdir(kept_dir):
        _remove(kept_dir)  # set aside by an attempt whose partitions are not reused now
    return plan


def _set_aside(url: str, kept_dir: str, wanted: set[int]) -> tuple[list[int], str | None]:
    folders = taskfiles.task_folders(url)
    if taskfiles.job_commit_began(url, folders):
        return [], None
    chosen = {p: f for p, f in taskfiles.usable(folders, empty_ok=wanted).items() if p in wanted}
    os.makedirs(kept_dir, exist_ok=True)
    for folder in chosen.values():
        target = os.path.join(kept_dir, os.path.basename(folder.path))
        if os.path.dirname(folder.path) != kept_dir:
            os.replace(folder.path, target)  # one atomic rename per task: a crash loses nothing
    for partition, candidates in folders.items():  # what is not kept must not be merged later
        for folder in candidates:
            if os.path.dirname(folder.path) == kept_dir and chosen.get(partition) is not folder:
                _remove(folder.path)
    return sorted(chosen), storage.to_spark_path(kept_dir) if chosen else None


def _remove(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def started(rt: Any, name: str, target: Target, plan: TaskPlan) -> None:
    staging = storage.join(target.url, "_temporary", "0")
    rt.writer.emit(ev.WRITE_STARTED, stage=name, partitions=plan.shape.partitions, staging=staging,
                   shape=plan.shape.digest, reusable=plan.reusable, reason=plan.reason, kept=plan.kept)


def run(target: Target, plan: TaskPlan, writer: Any, do_write: Callable[[], Any]) -> Any:
    """The write through the partition wrapper (every attempt, so partition *i* means the same
    rows), under the resuming commit protocol when partitions are kept. ``writer`` is the
    DataFrameWriter ``do_write`` saves through."""
    if not plan.reusable:
        return do_write()
    frame = partitions.without_partitions(target.frame, plan.kept)
    _point_writer_at(writer, frame)
    if not plan.kept:
        return do_write()
    with partitions.resuming_commit(target.spark, plan.kept_dir, plan.kept):
        result = do_write()
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
