"""The committed tasks of the committers that record them as lists of files, read as
``taskfiles.TaskFolder``s (docs/task-resume.md, "On HDFS and object stores"; what a resumed write
keeps of them is decided with the task folders', by ``core/fold/kept_partitions.adopt``).

Under hadoop-aws's magic committer a committed task is a pendingset:
``<target>/__magic/job-<uuid>/task_<job>_m_<partition>.pendingset`` (``__magic_job-<uuid>/`` from
Hadoop 3.4), a JSON list of the multipart uploads the task left open at their final keys, set
aside as files into ``kept_dir``. ``pendingsets`` reads them as ``TaskFolder``s whose files are
those keys.

Under Hadoop's manifest committer a committed task is a manifest,
``<target>/_temporary/<job uuid>/<attempt>/manifests/task_<job>_m_<partition>-manifest.json``, naming
each file of its task (left in the job's ``tasks/`` folder, absolute paths) and where the job commit
renames it. ``manifests`` reads them as ``TaskFolder``s too; they cannot move, so they are kept in
place.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from sparkrecover.kinds import CommitKind
from sparkrecover.rundir import storage
from sparkrecover.rundir.taskfiles import PART_FILE, TaskFolder, dir_names, files_below, kept_dir, task_folders

_PENDINGSET = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)\.pendingset$")
MAGIC_DIR = "__magic"
_MAGIC_JOB = re.compile(r"^(?:__magic/job-|__magic_job-)[^/]+$")
_MANIFEST = re.compile(r"^task_[0-9a-zA-Z]+_\d+_m_(\d+)-manifest\.json$")


def on_s3(target_url: str) -> bool:
    """Whether the magic committer can have written below the target (S3, through s3a)."""
    return storage.scheme_of(storage.to_spark_path(target_url)) == "s3a"


def magic_job_dirs(target_url: str) -> list[str]:
    """The magic committer's job folders below the target, as the data filesystem names them."""
    fs, root = storage.data_filesystem(target_url)
    root = root.rstrip("/")
    found: list[str] = []
    with storage.guard(target_url, "list pendingsets"):
        for top in dir_names(fs, root):
            if top == MAGIC_DIR:
                found += [f"{root}/{MAGIC_DIR}/{name}" for name in dir_names(fs, f"{root}/{MAGIC_DIR}")]
            elif top.startswith(MAGIC_DIR + "_job-"):
                found.append(f"{root}/{top}")
    return sorted(p for p in found if _MAGIC_JOB.match(p[len(root) + 1 :]))


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


def committed(target_url: str, kind: CommitKind) -> dict[int, list[TaskFolder]]:
    """The committed tasks of one kind of committer below the target (and set aside), by partition:
    the reader ``core/fold/kept_partitions.adopt`` is given. No pendingset is looked for off S3."""
    if kind == CommitKind.PENDINGSETS:
        return pendingsets(target_url) if on_s3(target_url) else {}
    if kind == CommitKind.MANIFESTS:
        return manifests(target_url)
    return task_folders(target_url)


def kept_pendingsets(target_url: str, place: str) -> dict[int, list[TaskFolder]]:
    """The pendingsets in ``place`` (a path of the data filesystem) by partition, from their names
    only: ``pendingsets`` read and checked them before they were kept there."""
    fs = storage.data_filesystem(target_url)[0]
    found: dict[int, list[TaskFolder]] = {}
    with storage.guard(target_url, "list pendingsets"):
        for task in _task_files(fs, place, _PENDINGSET):
            found.setdefault(task.partition, []).append(task)
    return found


def job_of(target_url: str, task: TaskFolder) -> str | None:
    """The S3A job UUID a pendingset was committed under (one read)."""
    fs = storage.data_filesystem(target_url)[0]
    with storage.guard(target_url, "read a pendingset"):
        try:
            return str(orjson.loads(fs.cat(task.path))["jobId"])
        except (ValueError, TypeError, KeyError) as error:
            raise OSError(f"{task.path} is not a readable pendingset ({type(error).__name__})") from error


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
        match = PART_FILE.match(relative.rsplit("/", 1)[-1])
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
    tasks: list[TaskFolder] = []
    with storage.guard(target_url, "read task manifests"):
        for job in dir_names(fs, temporary):
            if job.isdigit():
                continue  # FileOutputCommitter's application attempt folder, not a job's
            for attempt in dir_names(fs, f"{temporary}/{job}"):
                tasks += _read_manifests(fs, f"{temporary}/{job}/{attempt}/manifests", _path_of(root))
        if tasks:
            # A resumed write moved the manifests it adopted into its own job's folder; their files
            # stay in the dead job's: every file below _temporary counts, from one listing.
            below = _path_of(temporary)
            _check_sources(tasks, {f"{below}/{name}": size for name, size in files_below(fs, temporary).items()}, below)
    for task in tasks:
        found.setdefault(task.partition, []).append(task)
    return found


def source_jobs(task: TaskFolder) -> set[str]:
    """The job folders of ``_temporary`` that hold a manifest's files (by name)."""
    return {source.split("/_temporary/", 1)[-1].split("/", 1)[0] for source, _ in task.sources}


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
    match = PART_FILE.match(relative.rsplit("/", 1)[-1])
    if match is None or int(match[1]) != task.partition:
        task.problem = f"{relative} does not belong to partition {task.partition}"
        return
    task.uuids.add(match[2])
    task.files.append((relative, size))
    task.sources.append((_path_of(source), size))


def _check_sources(tasks: list[TaskFolder], present: dict[str, int], temporary: str) -> None:
    """A manifest whose files are not all below ``_temporary`` with their sizes cannot be
    committed: it is not kept."""
    for task in tasks:
        for source, size in task.sources:
            if task.problem is None and (not source.startswith(temporary + "/") or present.get(source) != size):
                task.problem = f"{source} is missing or changed"


def _path_of(url: str) -> str:
    """The path part of a URI or filesystem path (``file:///a/b``, ``hdfs://nn:8020/a/b``, ``/a/b``:
    ``/a/b``), to compare a manifest's absolute names with a listing's."""
    if "://" in url:
        url = "/" + url.split("://", 1)[1].partition("/")[2]
    elif url.startswith("file:"):
        url = "/" + url[len("file:") :].lstrip("/")
    return "/" + url.strip("/")
