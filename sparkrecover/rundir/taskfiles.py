"""The output committer's evidence of committed tasks (docs/design.md §4a), read from the target's folder.

Hadoop's FileOutputCommitter (algorithm 1, Spark's default) commits a task by renaming its attempt
folder to ``<target>/_temporary/0/task_<job>_<n>_m_<partition>``: such a folder exists only for a
task the commit coordination authorized and whose rename finished. In-flight attempts sit under
``_temporary/0/_temporary/`` and are never evidence. sparkrecover sets committed folders aside
(``kept_dir``) before a resumed write, outside the target so that an overwrite's delete spares
them; both places are evidence.

A partition counts as committed only with exactly one usable folder: data files whose names carry
the partition (``part-<partition:05d>-<write uuid>…``), all of one write; or no file at all when the
journal says the task wrote no rows (Spark writes nothing for an empty partition other than 0).
Anything else is not kept: that partition is computed again, which is always safe.

Only local folders are read: stores without atomic rename (s3a, gs) fall back to a full rerun.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from sparkrecover.rundir import storage

JOB_ATTEMPT_DIR = os.path.join("_temporary", "0")
KEPT_PREFIX = ".sparkrecover-kept-"
_TASK = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)$")
_PART = re.compile(r"^part-(\d+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


@dataclass
class TaskFolder:
    partition: int
    path: str  # local path of the task_* folder
    files: list[tuple[str, int]] = field(default_factory=list)  # (relative name, size) of data files
    uuids: set[str] = field(default_factory=set)
    problem: str | None = None  # why it cannot be kept (names that do not match)


def kept_dir(target_url: str) -> str | None:
    """Where committed task folders of ``target_url`` are set aside: a hidden sibling folder on
    the same filesystem (a rename, never a copy), outside what an overwrite deletes."""
    if not storage.is_local(target_url):
        return None
    target = storage.normalize(target_url).rstrip("/")
    return os.path.join(os.path.dirname(target), KEPT_PREFIX + os.path.basename(target))


def _read_task(path: str, partition: int) -> TaskFolder:
    folder = TaskFolder(partition, path)
    for parent, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            if name.startswith((".", "_")):
                continue  # checksum files and markers travel with their data file
            relative = os.path.relpath(os.path.join(parent, name), path)
            match = _PART.match(name)
            if match is None or int(match[1]) != partition:
                folder.problem = f"{relative} does not belong to partition {partition}"
                continue
            folder.uuids.add(match[2])
            folder.files.append((relative, os.path.getsize(os.path.join(parent, name))))
    if len(folder.uuids) > 1:
        folder.problem = f"files of {len(folder.uuids)} writes in one task folder"
    return folder


def task_folders(target_url: str) -> dict[int, list[TaskFolder]]:
    """Every committed task folder of the target, in ``_temporary/0`` and set aside, by partition."""
    found: dict[int, list[TaskFolder]] = {}
    if not storage.is_local(target_url):
        return found
    places = [os.path.join(storage.normalize(target_url), JOB_ATTEMPT_DIR), kept_dir(target_url) or ""]
    for place in places:
        if not place or not os.path.isdir(place):
            continue
        for name in sorted(os.listdir(place)):
            match = _TASK.match(name)
            if match and os.path.isdir(os.path.join(place, name)):
                partition = int(match[1])
                found.setdefault(partition, []).append(_read_task(os.path.join(place, name), partition))
    return found


def usable(folders: dict[int, list[TaskFolder]], empty_ok: set[int]) -> dict[int, TaskFolder]:
    """The one folder to keep for each partition that has one; ``empty_ok``: partitions whose task
    the journal says wrote no rows, for which a folder without files is the right evidence."""
    chosen: dict[int, TaskFolder] = {}
    for partition, candidates in folders.items():
        good = [f for f in candidates if f.problem is None and (f.files or partition in empty_ok)]
        with_files = [f for f in good if f.files]
        if len(with_files) == 1:
            chosen[partition] = with_files[0]
        elif not with_files and good:
            chosen[partition] = good[0]
    return chosen


def job_commit_began(target_url: str, folders: dict[int, list[TaskFolder]]) -> bool:
    """Whether data files of these task folders' writes already sit in the target itself: the
    dead attempt's job commit had begun merging, and what is left cannot be trusted."""
    uuids = {uuid for candidates in folders.values() for f in candidates for uuid in f.uuids}
    if not uuids or not storage.is_local(target_url):
        return False
    root = storage.normalize(target_url)
    for _, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            match = _PART.match(name)
            if match and match[2] in uuids:
                return True
    return False
