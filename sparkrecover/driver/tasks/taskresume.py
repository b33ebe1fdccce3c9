"""Task-level resume inside one implicit write (docs/design.md §4a): which partitions an unfinished
write keeps of the tasks its committer committed, and running the write so that only the other
partitions are computed.

The protocol, step by step (docs/decisions/0009-task-level-resume.md lists what a crash between
any two leaves):
1. ``set_aside``, before anything of the target is cleaned: the one rule the plan was made with
   (``core/fold/kept_partitions.adopt``) adopts one committer's committed tasks, and each kind
   keeps them its own way:
   - FileOutputCommitter's task folders (``_temporary/0/task_*``) are renamed into the hidden
     ``kept`` folder beside the target (``_move_into_kept_dir``), or, where the write's mode lets
     them stay on an object store, kept where they are with the rest of the job attempt folder
     removed (``_keep_in_place``); the dead writer's open multipart uploads are aborted;
   - the S3A magic committer's pendingsets stay in the dead job's folder for an overwrite or
     append (the resumed write runs under that job's UUID), or move into the ``kept`` folder;
     every other task's uploads are aborted (``_keep_pendingsets``);
   - the manifest committer's task manifests stay in the dead job's manifests folder, with other
     jobs' folders and the manifests not kept removed (``_keep_manifests``).
   Tasks of other partitions die with the cleanup; what is kept is found again by the next resume
   if this attempt dies too.
2. ``plan_write``: which of the tasks waiting there the write keeps, checked against its shape.
3. ``write.started`` names the partition count, the write's shape and the kept partitions.
4. ``run``: the writer is pointed at the same rows through ``KeptPartitionsRDD`` (kept partitions
   empty, never computed) and, when something is kept, ``ResumingCommitProtocol`` brings the kept
   tasks into the job before the committer's own job commit (task folders into its
   ``_temporary/0`` at job setup), which then publishes them with the rest before ``_SUCCESS``.
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
    """Step 1, before anything cleans the target: on an object store, abort the multipart uploads a
    dead writer left below it (files of tasks that never finished: they cost money until aborted
    and nothing would ever complete them); for a ``continue`` decision, move the kept partitions'
    committed task folders out of the target, or, where the write's ``mode`` lets them stay on an
    object store, remove everything else from the job attempt folder they are in. The write
    checks them against its shape later."""
    tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
    kept_dir = taskfiles.kept_dir(url)
    wanted, empty_ok = (set(tasks.kept), set(tasks.empty)) if tasks else (set(), set())

    def read(kind: CommitKind) -> dict[int, list[taskfiles.TaskFolder]]:
        if kind == CommitKind.FOLDERS and not (tasks and kept_dir):
            return {}  # none kept: the write's own job cleanup removes them
        return tasklists.committed(url, kind)

    try:
        adopted = kept_partitions.adopt(read, wanted, empty_ok, partial(taskfiles.job_commit_began, url))
        if adopted.kind == CommitKind.MANIFESTS:
            _keep_manifests(url, adopted)
            return
        if adopted.kind == CommitKind.PENDINGSETS:
            _keep_pendingsets(url, kept_dir, adopted, mode)
            return
        _abort_uploads(url, kept_dir)
        if tasks and kept_dir:
            if taskfiles.keeps_in_place(url, mode) and not storage.data_exists(kept_dir):
                _keep_in_place(url, adopted)
            else:
                _move_into_kept_dir(url, kept_dir, adopted)
    except (OSError, StorageError) as error:  # what was not moved is computed again: slower, never wrong
        messages.say(f"sparkrecover: warning: committed tasks of {url} not kept: {error}")


def _keep_pendingsets(
    url: str, kept_dir: str | None, adopted: kept_partitions.Adopted[taskfiles.TaskFolder], mode: str | None
) -> None:
    """Step 1 under the magic committer: the kept partitions' pendingsets (a task each, whose
    uploads are all still open) stay in the dead job's folder for an overwrite or append (the
    resumed write runs under that job's UUID: its job commit loads them there), or are moved into
    ``kept_dir`` for a write that needs the target gone; the uploads of every other task are
    aborted, and everything else of the committer's folders removed: nothing else of the dead job
    is ever completed."""
    fs, root = storage.data_filesystem(url)
    chosen = adopted.chosen if kept_dir is not None else {}  # (usable: its uploads all still open)
    places = {taskfiles.place_of(task) for task in chosen.values()}
    kept_path = storage.data_filesystem(kept_dir)[1] if kept_dir is not None else None
    in_place = len(places) == 1 and kept_path not in places and taskfiles.keeps_in_place(url, mode)
    for candidates in adopted.found.values():
        for task in candidates:
            if chosen.get(task.partition) is not task and (in_place or taskfiles.place_of(task) == kept_path):
                fs.rm(task.path)
    if chosen and not in_place and kept_path is not None:
        fs.makedirs(kept_path, exist_ok=True)
        for task in chosen.values():
            if taskfiles.place_of(task) != kept_path:
                fs.mv(task.path, f"{kept_path}/{task.path.rsplit('/', 1)[-1]}")
    abort = getattr(fs, "abort_uploads", None)
    if abort is not None:
        abort(root, {upload for task in chosen.values() for upload in task.uploads})
    job = places.pop() if in_place else None
    for folder in tasklists.magic_job_dirs(url):
        if folder != job:
            fs.rm(folder, recursive=True)
    if job is None:
        _remove(storage.join(url, tasklists.MAGIC_DIR))
    else:
        _remove(storage.join(url, job[len(root.rstrip("/")) + 1 :], "tasks"))  # the dead job's tasks in flight
        if kept_dir is not None:
            _remove(kept_dir)


def _keep_manifests(url: str, adopted: kept_partitions.Adopted[taskfiles.TaskFolder]) -> None:
    """Step 1 under the manifest committer: its committed tasks stay where they are (their
    manifests name their files by absolute path); every other folder of ``_temporary`` goes, the
    dead job's too when nothing of it is kept."""
    temporary = storage.join(url, "_temporary")
    chosen = adopted.chosen
    if not chosen:
        _remove(temporary)
        return
    fs, path = storage.data_filesystem(temporary)
    place = taskfiles.place_of(next(iter(chosen.values())))
    # The job folder of the manifests (<uuid> of .../_temporary/<uuid>/<NN>/manifests), and those of
    # their files: a resume that died too had moved the manifests it adopted into its own.
    jobs = {place.rsplit("/", 3)[1]}.union(*(tasklists.source_jobs(task) for task in chosen.values()))
    for name in fs.ls(path, detail=False):
        if name.rstrip("/").rsplit("/", 1)[-1] not in jobs:
            fs.rm(name, recursive=True)
    kept = {task.path for task in chosen.values()}
    for candidates in adopted.found.values():  # one manifest a partition: the job commit publishes every one
        for task in candidates:
            if taskfiles.place_of(task) == place and task.path not in kept:
                fs.rm(task.path)


def plan_write(target: Target | None, entry: PlanEntry) -> TaskPlan | None:
    """What this write keeps (of what ``set_aside`` moved), and whether its partitions can be
    kept at all; None where task-level resume does not apply (no output folder)."""
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
    kept_dir = taskfiles.kept_dir(target.url)
    set_aside_before = kept_dir is not None and storage.data_exists(kept_dir)
    pendingsets = kind == partitions.PENDINGSETS
    in_place = (
        bool(tasks) and not pendingsets and not set_aside_before and taskfiles.keeps_in_place(target.url, target.mode)
    )
    place = taskfiles.job_attempt_dir(target.url) if in_place else kept_dir if set_aside_before else None
    other = None  # another committer whose committed tasks set_aside adopted
    if tasks and plan.reusable and kind is not None:
        try:
            other = kept_partitions.outranked_by(CommitKind(kind), partial(tasklists.committed, target.url))
            if other is not None:
                plan.reason = f"its committed tasks are another committer's ({other}), not this write's ({kind})"
            else:
                _keep(plan, target, tasks, place, in_place, set_aside_before)
        except (OSError, StorageError) as error:  # cannot tell what is kept: nothing is, the write runs whole
            plan.kept, plan.kept_dir, plan.in_place, plan.kept_job = [], None, False, None
            plan.reason = f"its committed tasks could not be read ({error})"
    in_place = in_place or plan.in_place
    if not plan.kept and kept_dir and set_aside_before:
        _abort_uploads(target.url, None)  # a set-aside pendingset's: nothing of this write runs yet
        _remove(kept_dir)  # set aside by an attempt whose partitions are not reused now
    if not plan.kept and in_place and (pendingsets or other == CommitKind.PENDINGSETS):
        try:  # nothing of this write runs yet: every upload below the target is the dead job's
            _abort_uploads(target.url, None)
            for folder in tasklists.magic_job_dirs(target.url):
                storage.data_filesystem(target.url)[0].rm(folder, recursive=True)
            _remove(storage.join(target.url, tasklists.MAGIC_DIR))
        except (OSError, StorageError) as error:  # the write runs under its own UUID: none of it is loaded
            messages.say(
                f"sparkrecover: warning: the dead job's pendingsets below {target.url} not removed: {error}",
            )
    if not plan.kept and in_place and not pendingsets:
        _remove(storage.join(target.url, "_temporary"))  # the job commit would merge them otherwise
    return plan


def _keep(
    plan: TaskPlan, target: Target, tasks: KeptTasks, place: str | None, in_place: bool, set_aside_before: bool
) -> None:
    """Which partitions the write keeps of what waits for it (``plan.kept``, ``kept_dir``,
    ``in_place``, ``kept_job``): task folders at ``place``, the magic committer's pendingsets in its
    dead job's folder or set aside, the manifest committer's manifests in place."""
    pendingsets, manifests = plan.kind == partitions.PENDINGSETS, plan.kind == partitions.MANIFESTS
    chosen: dict[int, taskfiles.TaskFolder] = {}
    jobs = tasklists.magic_job_dirs(target.url) if pendingsets else []
    if pendingsets and not set_aside_before:
        # Kept in place, in the dead job's folder (_keep_pendingsets left only that one).
        in_place = len(jobs) == 1
        place = jobs[0] if in_place else None
    if manifests:
        # Kept in place, in the dead job's manifests folder (_keep_manifests left only that job's).
        found = tasklists.manifests(target.url)
        chosen = kept_partitions.choose(CommitKind.MANIFESTS, found, tasks.kept, set(tasks.empty))
        in_place = bool(chosen)
        place = taskfiles.place_of(next(iter(chosen.values()))) if chosen else None
    if not place:
        return
    changed = _changed(tasks, plan.shape)
    if changed is not None:
        plan.reason = changed
        plan.in_place = in_place and (pendingsets or manifests)  # what waits there is removed: not kept
        return
    if manifests:  # a path of the data filesystem already
        folders, kept_path = {p: [f] for p, f in chosen.items()}, place
    elif pendingsets:  # read by _keep_pendingsets: listed here, one read for the job's UUID
        kept_path = place if in_place else storage.data_filesystem(place)[1]
        folders = tasklists.kept_pendingsets(target.url, kept_path)
    else:
        folders = taskfiles.task_folders(target.url)
        kept_path = storage.data_filesystem(place)[1]
    here = {p: [f for f in candidates if taskfiles.place_of(f) == kept_path] for p, candidates in folders.items()}
    kept = kept_partitions.agreed(tasks.kept, [p for p, found in here.items() if found])
    if pendingsets and kept:
        # The job commit loads every pendingset of its UUID's folder: keep only when nothing but the
        # kept ones can be there (a set-aside cut short by an error leaves others).
        others = [p for p, found in here.items() if found and p not in kept]
        strays = [d for d in jobs if d != place]
        if others or strays:
            plan.reason = "the dead job's other pendingsets could not all be cleared: nothing is kept"
            plan.in_place = in_place
            return
        plan.kept_job = tasklists.job_of(target.url, here[kept[0]][0])
    plan.kept = kept
    plan.kept_dir = storage.to_spark_path(place) if kept else None
    plan.in_place = in_place and bool(kept)


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


def _move_into_kept_dir(url: str, kept_dir: str, adopted: kept_partitions.Adopted[taskfiles.TaskFolder]) -> None:
    if adopted.began:
        _remove(kept_dir)
        return
    chosen = adopted.chosen
    fs, kept_path = storage.data_filesystem(kept_dir)
    for partition, candidates in adopted.found.items():  # what is not kept must not be merged later
        for folder in candidates:
            if taskfiles.place_of(folder) == kept_path and chosen.get(partition) is not folder:
                fs.rm(folder.path, recursive=True)
    fs.makedirs(kept_path, exist_ok=True)
    for folder in chosen.values():
        if taskfiles.place_of(folder) != kept_path:
            # One rename per task: atomic where renames are (a crash loses nothing); on an object
            # store a copy of each file, and a crash leaves files in both places: never kept.
            fs.mv(folder.path, f"{kept_path}/{folder.path.rsplit('/', 1)[-1]}")


def _keep_in_place(url: str, adopted: kept_partitions.Adopted[taskfiles.TaskFolder]) -> None:
    """Leave in the job attempt folder only the task folders the write will keep: the rest (other
    partitions' folders, tasks in flight, other job attempts) would be merged by its job commit."""
    temporary = storage.join(url, "_temporary")
    if adopted.began:
        _remove(temporary)
        return
    keep = {task.path for task in adopted.chosen.values()}
    fs, attempt = storage.data_filesystem(taskfiles.job_attempt_dir(url))
    for folder, spared in ((storage.data_filesystem(temporary)[1], attempt), (attempt, None)):
        try:
            entries = fs.ls(folder, detail=False)
        except FileNotFoundError:
            continue
        for name in entries:
            name = name.rstrip("/")
            if name != spared and name not in keep:
                fs.rm(name, recursive=True)


def _abort_uploads(url: str, kept_dir: str | None) -> None:
    for place in (url, kept_dir):
        if place is not None and not storage.is_local(place):
            fs, path = storage.data_filesystem(place)
            abort = getattr(fs, "abort_uploads", None)
            if abort is not None:
                abort(path)


def _remove(url: str) -> None:
    """Remove a folder of the data's filesystem, if it is there."""
    if storage.is_local(url):
        import shutil

        shutil.rmtree(storage.normalize(url), ignore_errors=True)
        return
    fs, path = storage.data_filesystem(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


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
    kept_dir = taskfiles.kept_dir(target.url)
    if kept_dir is not None:
        _remove(kept_dir)
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
