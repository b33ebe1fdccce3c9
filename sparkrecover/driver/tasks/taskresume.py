"""Task-level resume inside one implicit write (docs/design.md §4a): which partitions an unfinished
write keeps of the tasks its committer committed, and running the write so that only the other
partitions are computed.

The steps, whatever the committer (docs/decisions/0009-task-level-resume.md lists what a crash
between any two leaves); how each kind of committer keeps its tasks is its own module's, behind
one interface (``committers.Committer``, chosen from ``STRATEGIES``): FileOutputCommitter's task
folders (``file_output_committer``), the S3A magic committer's pendingsets (``magic_committer``),
the manifest committer's task manifests (``manifest_committer``).
1. ``set_aside``, before anything of the target is cleaned: the one rule the plan was made with
   (``core/fold/kept_partitions.adopt``) adopts one committer's committed tasks, and that
   committer keeps them (set aside beside the target, or where the dead job left them); tasks of
   other partitions die with the cleanup, and what is kept is found again by the next resume if
   this attempt dies too.
2. ``plan_write``: the write's own committer says which of the tasks waiting for it the write keeps,
   checked against its shape; nothing, and what waits below the target removed, when they are
   another committer's.
3. ``write.started`` names the partition count, the write's shape and the kept partitions.
4. ``run``: the writer is pointed at the same rows through ``KeptPartitionsRDD`` (kept partitions
   empty, never computed) and, when something is kept, ``ResumingCommitProtocol`` brings the kept
   tasks (``TaskPlan.kept_dir``, and ``kept_job`` for pendingsets) into the job before the
   committer's own job commit, which then publishes them with the rest before ``_SUCCESS``.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sparkrecover.core.fold import kept_partitions
from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.process import messages
from sparkrecover.driver.tasks import partitions
from sparkrecover.driver.tasks.committers import Committer, ResumedWrite, abort_uploads, remove
from sparkrecover.driver.tasks.file_output_committer import FileOutputCommitter
from sparkrecover.driver.tasks.magic_committer import MagicCommitter
from sparkrecover.driver.tasks.manifest_committer import ManifestCommitter
from sparkrecover.errors import StorageError
from sparkrecover.journal import events as ev
from sparkrecover.jvm import KEPT_PROPERTY
from sparkrecover.kinds import CommitKind, Verdict
from sparkrecover.rundir import storage, taskfiles, tasklists
from sparkrecover.rundir.plans import KeptTasks, PlanEntry


@dataclass
class TaskPlan:
    shape: partitions.WriteShape
    reason: str | None  # why nothing can be kept (None: partitions are reusable)
    kept: list[int] = field(default_factory=list)
    kept_dir: str | None = None  # the kept task folders' folder, as Spark names it
    in_place: bool = False  # kept where the dead job left them (taskfiles.keeps_in_place)
    kind: str | None = None  # how the write commits its tasks (partitions.FOLDERS, PENDINGSETS, MANIFESTS)
    kept_job: str | None = None  # the S3A job UUID of kept pendingsets

    @property
    def reusable(self) -> bool:
        return self.reason is None


# One strategy a kind of committer: how its committed tasks are found, kept and handed to the job.
STRATEGIES: dict[CommitKind, type[Committer]] = {
    CommitKind.FOLDERS: FileOutputCommitter,
    CommitKind.PENDINGSETS: MagicCommitter,
    CommitKind.MANIFESTS: ManifestCommitter,
}

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


def whole_reason(write: Any) -> str:
    """Why an implicit write that ``target_of`` turns down keeps no committed partition (journaled on
    its ``stage.started`` as ``whole``, so that a resume can say it)."""
    if write.table is not None:
        return f"it writes {write.target}, and only a write to a path keeps its committed partitions"
    if not write.url:
        return "it writes to a sink, not to a folder of files"
    return "only a DataFrame write keeps its committed partitions (this is an RDD or model save, or a SQL statement)"


def set_aside(url: str, entry: PlanEntry, mode: str | None = None) -> None:
    """Step 1, before anything cleans the target: the committer whose committed tasks the one rule
    adopts (``core/fold/kept_partitions.adopt``, the rule the plan was made with) keeps them its way,
    set aside or where the dead job left them, for a ``continue`` decision; the rest of its tasks go,
    and a dead writer's open multipart uploads below the target are aborted (files of tasks that
    never finished: they cost money until aborted and nothing would ever complete them). The write
    checks what is kept against its shape later (``plan_write``)."""
    tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
    write = ResumedWrite(url, mode, tasks, taskfiles.kept_dir(url))
    wanted, empty_ok = (set(tasks.kept), set(tasks.empty)) if tasks else (set(), set())
    try:
        adopted = kept_partitions.adopt(
            lambda kind: STRATEGIES[kind](write).evidence(), wanted, empty_ok, partial(taskfiles.job_commit_began, url)
        )
        STRATEGIES[adopted.kind](write).set_aside(adopted)
    except (OSError, StorageError) as error:  # what was not moved is computed again: slower, never wrong
        messages.say(f"sparkrecover: warning: committed tasks of {url} not kept: {error}")


def plan_write(target: Target | None, entry: PlanEntry) -> TaskPlan | None:
    """What this write keeps (of what ``set_aside`` kept), and whether its partitions can be kept at
    all; None where task-level resume does not apply (no output folder)."""
    if target is None:
        return None
    kind = None
    try:
        kind, reason = _committer(target)
        shape = partitions.WriteShape(0, False, reason) if reason is not None else partitions.shape_of(target.frame)
    except Exception as error:  # probing must never break the write: it runs whole
        reason = f"its partitions could not be probed ({type(error).__name__}: {error})"
        shape = partitions.WriteShape(0, False, reason)
    if shape.reusable:
        # The script's own code is part of what partition i holds (a UDF's body does not show in
        # the plan): an edited script keeps no partition of an earlier attempt (§4 rule 5).
        script = staleness.script_digest(sys.argv[0], storage.read_bytes)  # as the bootstrap set it
        shape.digest = hashlib.sha256(f"{shape.digest}\n{script}".encode()).hexdigest()[:32]
    plan = TaskPlan(shape, reason if reason is not None else (None if shape.reusable else shape.reason), kind=kind)
    tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
    aside = taskfiles.kept_dir(target.url)
    write = ResumedWrite(target.url, target.mode, tasks, aside, aside is not None and storage.data_exists(aside))
    # A write under a committer whose tasks are never kept clears what its dead job left as
    # FileOutputCommitter's strategy does: its _temporary.
    committer = STRATEGIES[CommitKind(kind) if kind is not None else CommitKind.FOLDERS](write)
    in_place = committer.waits_in_place()
    other = None  # another committer whose committed tasks set_aside adopted
    if tasks and plan.reusable and kind is not None:
        try:
            other = kept_partitions.outranked_by(committer.kind, partial(tasklists.committed, target.url))
            if other is not None:
                plan.reason = f"its committed tasks are another committer's ({other}), not this write's ({kind})"
            else:
                _keep(plan, committer)
        except (OSError, StorageError) as error:  # cannot tell what is kept: nothing is, the write runs whole
            plan.kept, plan.kept_dir, plan.in_place, plan.kept_job = [], None, False, None
            plan.reason = f"its committed tasks could not be read ({error})"
    if not plan.kept:
        if aside is not None and write.set_aside_before:
            abort_uploads(target.url, None)  # a set-aside pendingset's: nothing of this write runs yet
            remove(aside)  # set aside by an attempt whose partitions are not reused now
        if in_place or plan.in_place:  # what waits below the target, another committer's first
            for left in (other, committer.kind):
                if left is not None:
                    STRATEGIES[left](write).clear()
    return plan


def _keep(plan: TaskPlan, committer: Committer) -> None:
    """Which partitions the write keeps of what waits for it, as its committer finds them
    (``plan.kept``, ``kept_dir``, ``in_place``, ``kept_job``), or why it keeps none."""
    tasks = committer.write.tasks
    if tasks is None:
        return
    kept = committer.keep(_changed(tasks, plan.shape))
    if kept is None:
        return
    plan.reason = kept.refusal
    plan.kept, plan.in_place, plan.kept_job = kept.partitions, kept.in_place, kept.job
    plan.kept_dir = storage.to_spark_path(kept.place) if kept.partitions and kept.place else None


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


def _committer(target: Target) -> tuple[str | None, str | None]:
    """How the write commits its tasks, or why its committed tasks cannot be kept."""
    spark = target.spark
    fmt = (target.format or spark.conf.get("spark.sql.sources.default", "parquet")).lower()
    if fmt not in partitions.FILE_FORMATS:
        return None, f"the {fmt} format does not commit through task folders"
    return partitions.write_committer(spark, target.spark_path, mode=target.mode, frame=target.frame, format=fmt)


def prepare(target: Target | None, entry: PlanEntry) -> TaskPlan | None:
    """Both steps, for a write whose DataFrame is known before its target is cleaned."""
    if target is not None:
        set_aside(target.url, entry, target.mode)
    return plan_write(target, entry)


def journal_write_started(rt: Any, name: str, target: Target, plan: TaskPlan) -> None:
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
        # Where the kept partitions' task folders wait for the job commit (Spark's name): set
        # aside beside the target, or in place in its job attempt folder (an object store).
        kept_dir=plan.kept_dir,
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
        with partitions.resuming_commit(target.spark, plan.kept_dir, plan.kept, plan.kept_job):
            result = do_write()
    finally:
        sc.setLocalProperty(KEPT_PROPERTY, before)
    aside = taskfiles.kept_dir(target.url)
    if aside is not None:
        remove(aside)
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
