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

A partition counts as committed only with exactly one usable folder: data files whose names carry
the partition (``part-<partition:05d>-<write uuid>…``), all of one write; or no file at all when the
journal says the task wrote no rows (Spark writes nothing for an empty partition other than 0).
Anything else is not kept: that partition is computed again, which is always safe.

Under hadoop-aws's magic committer a committed task is a pendingset instead:
``<target>/__magic/job-<uuid>/task_<job>_m_<partition>.pendingset`` (``__magic_job-<uuid>/`` from
Hadoop 3.4), a JSON list of the multipart uploads the task left open at their final keys, set
aside as files into ``kept_dir``. ``pendingsets`` reads them as ``TaskFolder``s whose files are
those keys: the same rules choose one per partition.

Under Hadoop's manifest committer a committed task is a manifest,
``<target>/_temporary/<job uuid>/<attempt>/manifests/task_<job>_m_<partition>-manifest.json``, naming
each file of its task (left in the job's ``tasks/`` folder, absolute paths) and where the job commit
renames it. ``manifests`` reads them as ``TaskFolder``s too; they cannot move, so they are kept in
place.

Read through ``storage.data_filesystem``: fsspec on the command line (s3fs for ``s3://``, pyarrow
for ``hdfs://``), Hadoop's FileSystem in the driver.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from sparkrecover.rundir import storage

JOB_ATTEMPT_DIR = "_temporary/0"
KEPT_PREFIX = ".sparkrecover-kept-"
# Hadoop schemes of object stores, where a rename is a copy of each file and a delete.
COPYING_SCHEMES = frozenset({"s3a", "s3n", "s3", "gs", "oss", "cosn", "obs", "wasb", "wasbs"})
_TASK = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)$")
_PENDINGSET = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)\.pendingset$")
MAGIC_DIR = "__magic"
_MANIFEST = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)-manifest\.json$")
_MAGIC_JOB = re.compile(r"^(?:__magic/job-|__magic_job-)[^/]+$")
_PART = re.compile(r"^part-(\d+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


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


def _files_below(fs: Any, place: str) -> dict[str, int]:
    """Every file below ``place`` (relative name -> size); empty when it is absent."""
    try:
        found = fs.find(place, detail=True)
    except FileNotFoundError:
        return {}
    prefix = place.rstrip("/") + "/"
    return {name[len(prefix) :]: int(info.get("size") or 0) for name, info in found.items() if name.startswith(prefix)}


def _task_names(fs: Any, place: str) -> list[str]:
    try:
        entries = fs.ls(place, detail=True)
    except FileNotFoundError:
        return []
    return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")


def _read_tasks(fs: Any, place: str) -> list[TaskFolder]:
    """The task folders directly in ``place``, with their data files, from two listings (one flat
    listing of every file: on an object store one request per thousand files, not one per folder)."""
    tasks: dict[str, TaskFolder] = {}
    for name in _task_names(fs, place):
        match = _TASK.match(name)
        if match:
            tasks[name] = TaskFolder(int(match[1]), f"{place.rstrip('/')}/{name}")
    for relative, size in sorted(_files_below(fs, place).items()):
        task, _, inside = relative.partition("/")
        folder = tasks.get(task)
        if folder is None or not inside:
            continue
        leaf = inside.rsplit("/", 1)[-1]
        if leaf.startswith((".", "_")):
            continue  # checksum files and markers travel with their data file
        match = _PART.match(leaf)
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
    if not uuids:
        return False
    fs, root = storage.data_filesystem(target_url)
    with storage.guard(target_url, "list"):
        files = _files_below(fs, root)
    for relative in files:
        parts = relative.split("/")
        if any(part.startswith(("_", ".")) for part in parts[:-1]):
            continue  # _temporary (the committed tasks themselves), hidden folders
        match = _PART.match(parts[-1])
        if match and match[2] in uuids:
            return True
    return False


def on_s3(target_url: str) -> bool:
    """Whether the magic committer can have written below the target (S3, through s3a)."""
    return storage.scheme_of(storage.to_spark_path(target_url)) == "s3a"


def magic_job_dirs(target_url: str) -> list[str]:
    """The magic committer's job folders below the target, as the data filesystem names them."""
    fs, root = storage.data_filesystem(target_url)
    root = root.rstrip("/")
    found: list[str] = []
    with storage.guard(target_url, "list pendingsets"):
        for top in _dir_names(fs, root):
            if top == MAGIC_DIR:
                found += [f"{root}/{MAGIC_DIR}/{name}" for name in _dir_names(fs, f"{root}/{MAGIC_DIR}")]
            elif top.startswith(MAGIC_DIR + "_job-"):
                found.append(f"{root}/{top}")
    return sorted(p for p in found if _MAGIC_JOB.match(p[len(root) + 1 :]))


def _dir_names(fs: Any, place: str) -> list[str]:
    try:
        entries = fs.ls(place, detail=True)
    except FileNotFoundError:
        return []
    return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"]


def pendingsets(target_url: str) -> dict[int, list[TaskFolder]]:
    """Every committed task's pendingset of the target, in the magic committer's job folders and
    set aside in ``kept_dir``, by partition."""
    fs, root = storage.data_filesystem(target_url)
    target_key = _key_of(root)
    places = magic_job_dirs(target_url)
    aside = kept_dir(target_url)
    if aside is not None:
        places.append(storage.data_filesystem(aside)[1])
    found: dict[int, list[TaskFolder]] = {}
    with storage.guard(target_url, "read pendingsets"):
        for place in places:
            for task in _read_pendingsets(fs, place, target_key):
                found.setdefault(task.partition, []).append(task)
        if any(task.uploads for tasks in found.values() for task in tasks):
            _check_uploads(found, _open_uploads(fs, root))
    return found


def _check_uploads(found: dict[int, list[TaskFolder]], open_uploads: set[tuple[str, str]] | None) -> None:
    """A pendingset whose uploads are not all open any more (aborted by a bucket's lifecycle rule,
    or by hand) cannot be committed: it is not kept. None: the store cannot list them."""
    if open_uploads is None:
        return
    for tasks in found.values():
        for task in tasks:
            if task.problem is None and not set(task.uploads) <= open_uploads:
                task.problem = "its multipart uploads are no longer all open (aborted or expired)"


def _open_uploads(fs: Any, root: str) -> set[tuple[str, str]] | None:
    """The (key, upload id) of every multipart upload open below ``root``: through the driver's
    Hadoop client, or s3fs's S3 client on the command line; None for another filesystem."""
    if hasattr(fs, "uploads"):
        return set(fs.uploads(root))
    call = getattr(fs, "call_s3", None)
    if call is None:
        return None
    bucket, _, key = root.split("://", 1)[-1].partition("/")
    found: set[tuple[str, str]] = set()
    marker: dict[str, str] = {}
    while True:
        page = call("list_multipart_uploads", Bucket=bucket, Prefix=key.strip("/") + "/", **marker)
        found |= {(str(u["Key"]), str(u["UploadId"])) for u in page.get("Uploads") or []}
        if not page.get("IsTruncated"):
            return found
        marker = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


def _task_files(fs: Any, place: str, pattern: re.Pattern[str]) -> list[TaskFolder]:
    """A ``TaskFolder`` for each file directly in ``place`` whose name ``pattern`` matches (its
    group 1: the partition), still to be filled from the file."""
    try:
        entries = fs.ls(place, detail=True)
    except FileNotFoundError:
        return []
    tasks = []
    for entry in entries:
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        match = pattern.match(name)
        if match is not None and entry.get("type") != "directory":
            tasks.append(TaskFolder(int(match[1]), f"{place.rstrip('/')}/{name}"))
    return tasks


def _read_pendingsets(fs: Any, place: str, target_key: str) -> list[TaskFolder]:
    tasks = _task_files(fs, place, _PENDINGSET)
    for task in tasks:
        try:
            _fill_from_pendingset(task, orjson.loads(fs.cat(task.path)), target_key)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            task.problem = f"not a readable pendingset ({type(error).__name__})"
    return tasks


def _fill_from_pendingset(task: TaskFolder, data: dict[str, Any], target_key: str) -> None:
    """The files a pendingset commits, relative to the target, with their uploads and sizes."""
    task.job = str(data["jobId"])
    prefix = target_key + "/" if target_key else ""
    for commit in data["commits"]:
        key, upload = str(commit["destinationKey"]), str(commit["uploadId"])
        task.uploads.append((key, upload))
        if not key.startswith(prefix):
            task.problem = f"{key} is not below the target"
            continue
        relative = key[len(prefix) :]
        match = _PART.match(relative.rsplit("/", 1)[-1])
        if match is None or int(match[1]) != task.partition:
            task.problem = f"{relative} does not belong to partition {task.partition}"
            continue
        task.uuids.add(match[2])
        task.files.append((relative, int(commit.get("length") or 0)))
    if len(task.uuids) > 1:
        task.problem = f"files of {len(task.uuids)} writes in one pendingset"


def _key_of(path: str) -> str:
    """An object store path's key (``s3a://bucket/a/b`` and ``bucket/a/b`` alike: ``a/b``)."""
    rest = path.split("://", 1)[-1]
    return rest.partition("/")[2].strip("/")


def manifests(target_url: str) -> dict[int, list[TaskFolder]]:
    """Every committed task's manifest of the target (the manifest committer's, in its job folders
    ``_temporary/<uuid>/<attempt>/manifests``), by partition; a manifest whose files are not all in
    place (with their sizes) has a ``problem``."""
    fs, root = storage.data_filesystem(target_url)
    temporary = f"{root.rstrip('/')}/_temporary"
    found: dict[int, list[TaskFolder]] = {}
    with storage.guard(target_url, "read task manifests"):
        for job in _dir_names(fs, temporary):
            if job.isdigit():
                continue  # FileOutputCommitter's application attempt folder, not a job's
            for attempt in _dir_names(fs, f"{temporary}/{job}"):
                place = f"{temporary}/{job}/{attempt}"
                tasks = _read_manifests(fs, f"{place}/manifests", _path_of(root))
                if tasks:
                    below = _path_of(f"{place}/tasks")
                    present = {f"{below}/{name}": size for name, size in _files_below(fs, f"{place}/tasks").items()}
                    _check_sources(tasks, present, below)
                for task in tasks:
                    found.setdefault(task.partition, []).append(task)
    return found


def _read_manifests(fs: Any, place: str, root_path: str) -> list[TaskFolder]:
    tasks = _task_files(fs, place, _MANIFEST)
    for task in tasks:
        try:
            data = orjson.loads(fs.cat(task.path))
            task.job = str(data["jobId"])
            for file in data["files"]:
                _add_manifest_file(task, str(file["s"]), str(file["d"]), int(file["z"]), root_path)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            task.problem = f"not a readable task manifest ({type(error).__name__})"
        if len(task.uuids) > 1:
            task.problem = f"files of {len(task.uuids)} writes in one manifest"
    return tasks


def _add_manifest_file(task: TaskFolder, source: str, destination: str, size: int, root_path: str) -> None:
    relative = _path_of(destination)[len(root_path) + 1 :]
    if not _path_of(destination).startswith(root_path + "/"):
        task.problem = f"{destination} is not below the target"
        return
    match = _PART.match(relative.rsplit("/", 1)[-1])
    if match is None or int(match[1]) != task.partition:
        task.problem = f"{relative} does not belong to partition {task.partition}"
        return
    task.uuids.add(match[2])
    task.files.append((relative, size))
    task.sources.append((_path_of(source), size))


def _check_sources(tasks: list[TaskFolder], present: dict[str, int], tasks_path: str) -> None:
    """A manifest whose task files are not all in its job's ``tasks/`` folder with their sizes
    cannot be committed: it is not kept."""
    for task in tasks:
        for source, size in task.sources:
            if task.problem is None and (not source.startswith(tasks_path + "/") or present.get(source) != size):
                task.problem = f"{source} is missing or changed"


def _path_of(url: str) -> str:
    """The path part of a URI or filesystem path (``file:///a/b``, ``hdfs://nn:8020/a/b``, ``/a/b``:
    ``/a/b``), to compare a manifest's absolute names with a listing's."""
    if "://" in url:
        url = "/" + url.split("://", 1)[1].partition("/")[2]
    elif url.startswith("file:"):
        url = "/" + url[len("file:") :].lstrip("/")
    return "/" + url.strip("/")
