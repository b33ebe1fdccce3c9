"""The output committer's evidence of committed tasks (docs/design.md §4a), read from the target's folder.

Hadoop's FileOutputCommitter (algorithm 1, Spark's default) commits a task by renaming its attempt
folder to ``<target>/_temporary/0/task_<job>_<n>_m_<partition>``: such a folder exists only for a
task the commit coordination authorized and whose rename finished. In-flight attempts sit under
``_temporary/0/_temporary/`` and are never evidence. sparkrecover sets committed folders aside
(``kept_dir``) before a resumed write, outside the target so that an overwrite's delete spares
them; both places are evidence.

On an object store a rename is a copy of each file and a delete: a folder can be half there when
its task commit (or a set-aside) was cut short. The journal's ``task.committed``, written after
the task's commit returned, is what says a folder is whole; a half-moved set-aside leaves files in
both places, and a partition with two folders holding files is never kept.

A partition counts as committed only with exactly one usable folder (``core/fold/kept_partitions.usable``):
data files whose names carry the partition (``part-<partition:05d>-<write uuid>…``), all of one
write; or no file at all when the journal says the task wrote no rows (Spark writes nothing for an
empty partition other than 0).
Anything else is not kept: that partition is computed again, which is always safe.

The S3A magic committer's pendingsets and the manifest committer's task manifests are read in
``tasklists`` as ``TaskFolder``s too: the same rule chooses what a resumed write keeps of each
(``core/fold/kept_partitions.adopt``, for the plan and the driver alike). This module and ``tasklists``
only read.

Read through ``storage.data_filesystem``: fsspec on the command line (s3fs for ``s3://``, pyarrow
for ``hdfs://``), Hadoop's FileSystem in the driver.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.rundir import storage

JOB_ATTEMPT_DIR = "_temporary/0"
KEPT_PREFIX = ".sparkrecover-kept-"
# Hadoop schemes of object stores, where a rename is a copy of each file and a delete.
COPYING_SCHEMES = frozenset({"s3a", "s3n", "s3", "gs", "oss", "cosn", "obs", "wasb", "wasbs"})
_TASK = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)$")
PART_FILE = re.compile(r"^part-(\d+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


@dataclass
class TaskFolder:
    partition: int
    path: str  # the task_* folder, as the data filesystem names it
    files: list[tuple[str, int]] = field(default_factory=list)  # (relative name, size) of data files
    uuids: set[str] = field(default_factory=set)
    problem: str | None = None  # why it cannot be kept (names that do not match)
    # A pendingset's: the S3A job UUID it was committed under, and its (key, upload id) pairs.
    job: str | None = None
    uploads: list[tuple[str, str]] = field(default_factory=list)
    # A task manifest's: each file its job commit renames (path, size).
    sources: list[tuple[str, int]] = field(default_factory=list)

    @property
    def place(self) -> str:
        return place_of(self)


def kept_dir(target_url: str) -> str | None:
    """Where committed task folders of ``target_url`` are set aside: a hidden sibling folder on
    the same filesystem, outside what an overwrite deletes (None: the target has no parent, a
    bucket's root)."""
    target = storage.normalize(target_url).rstrip("/")
    if storage.is_local(target):
        parent, name = posixpath.split(target)
    else:
        scheme, _, rest = target.partition("://")
        if "/" not in rest:
            return None
        parent, name = posixpath.split(rest)
        parent = f"{scheme}://{parent}"
    return storage.join(parent, KEPT_PREFIX + name)


def job_attempt_dir(target_url: str) -> str:
    """Where FileOutputCommitter keeps a job's committed task folders until its job commit."""
    return storage.join(target_url, *JOB_ATTEMPT_DIR.split("/"))


def keeps_in_place(target_url: str, mode: str | None) -> bool:
    """Whether a resumed write keeps committed task folders where the dead job left them, in the
    job attempt folder, instead of setting them aside: on an object store, where setting them
    aside and moving them back would copy every kept file twice; for a write that leaves its
    target where it is (append) or empties it through the commit protocol (overwrite, which
    ``ResumingCommitProtocol.deleteWithJob`` makes spare them). A write that must find no target
    (errorifexists, ignore) sets them aside and pays the copies."""
    scheme = storage.scheme_of(storage.to_spark_path(target_url))
    return scheme in COPYING_SCHEMES and (mode or "").lower() in ("overwrite", "append")


def place_of(folder: TaskFolder) -> str:
    """The folder a task folder sits in (the job attempt's, or the set-aside one)."""
    return folder.path.rstrip("/").rsplit("/", 1)[0]


def files_below(fs: Any, place: str) -> dict[str, int]:
    """Every file below ``place`` (relative name -> size); empty when it is absent."""
    try:
        found = fs.find(place, detail=True)
    except FileNotFoundError:
        return {}
    prefix = place.rstrip("/") + "/"
    return {name[len(prefix) :]: int(info.get("size") or 0) for name, info in found.items() if name.startswith(prefix)}


def dir_names(fs: Any, place: str) -> list[str]:
    """The folders directly in ``place``, by name (none when it is absent)."""
    try:
        entries = fs.ls(place, detail=True)
    except FileNotFoundError:
        return []
    return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")


def _read_tasks(fs: Any, place: str) -> list[TaskFolder]:
    """The task folders directly in ``place``, with their data files, from two listings (one flat
    listing of every file: on an object store one request per thousand files, not one per folder)."""
    tasks: dict[str, TaskFolder] = {}
    for name in dir_names(fs, place):
        match = _TASK.match(name)
        if match:
            tasks[name] = TaskFolder(int(match[1]), f"{place.rstrip('/')}/{name}")
    for relative, size in sorted(files_below(fs, place).items()):
        task, _, inside = relative.partition("/")
        folder = tasks.get(task)
        if folder is None or not inside:
            continue
        leaf = inside.rsplit("/", 1)[-1]
        if leaf.startswith((".", "_")):
            continue  # checksum files and markers travel with their data file
        match = PART_FILE.match(leaf)
        if match is None or int(match[1]) != folder.partition:
            folder.problem = f"{inside} does not belong to partition {folder.partition}"
            continue
        folder.uuids.add(match[2])
        folder.files.append((inside, size))
    for folder in tasks.values():
        if len(folder.uuids) > 1:
            folder.problem = f"files of {len(folder.uuids)} writes in one task folder"
    return list(tasks.values())


def task_folders(target_url: str) -> dict[int, list[TaskFolder]]:
    """Every committed task folder of the target, in ``_temporary/0`` and set aside, by partition."""
    found: dict[int, list[TaskFolder]] = {}
    places = [storage.join(target_url, *JOB_ATTEMPT_DIR.split("/")), kept_dir(target_url)]
    for place in places:
        if place is None:
            continue
        fs, path = storage.data_filesystem(place)
        with storage.guard(place, "list committed tasks"):
            for folder in _read_tasks(fs, path):
                found.setdefault(folder.partition, []).append(folder)
    return found


def job_commit_began(target_url: str, folders: dict[int, list[TaskFolder]]) -> bool:
    """Whether data files of these task folders' writes already sit in the target itself: the
    dead attempt's job commit had begun merging, and what is left cannot be trusted."""
    uuids = {uuid for candidates in folders.values() for f in candidates for uuid in f.uuids}
    if not uuids:
        return False
    fs, root = storage.data_filesystem(target_url)
    with storage.guard(target_url, "list"):
        files = files_below(fs, root)
    for relative in files:
        parts = relative.split("/")
        if any(part.startswith(("_", ".")) for part in parts[:-1]):
            continue  # _temporary (the committed tasks themselves), hidden folders
        match = PART_FILE.match(parts[-1])
        if match and match[2] in uuids:
            return True
    return False
