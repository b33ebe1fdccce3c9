"""The keep folder: where a run's kept shuffle map outputs live, from its creation to its removal
(docs/shuffles.md).

``<run>/shuffles/`` holds the map outputs the keeping shuffle manager kept (hard links or copies,
one folder ``<identity>/map-<index>-t<task>-<nonce>/`` each, whole once its ``meta`` is written),
a range partitioning's bounds (``<identity>/bounds``) and the reuse lists handed to the JVM. It
lives where the run directory lives: a local folder, a folder every executor mounts, or shared
storage (``s3://``, ``hdfs://``, ``gs://``, ...), where the executors write it through Hadoop and
this module reads and removes it through fsspec. Both
processes need it: the command line creates it before an attempt, measures it for ``inspect``,
checks kept files for the planner and sweeps what no journal record names; whichever process sees
the run succeed (or a resume start from scratch) removes it, and that may be a driver restarted by
a launcher with no command line around.
"""

from __future__ import annotations

import glob
import os
import posixpath
import shutil
from collections.abc import Callable, Iterable

from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import KeptShuffle

FOLDER = "shuffles"  # under the run directory
# fsspec stores Spark's Hadoop cannot reach (the tests' in-memory root): nothing is kept there.
_NOT_FOR_SPARK = ("memory",)


def folder(run_dir: str) -> str | None:
    """Where kept map outputs live (a local path or a URL), or None for a store Spark cannot reach."""
    if storage.scheme_of(run_dir) in _NOT_FOR_SPARK:
        return None
    return storage.join(run_dir, FOLDER)


def create(run_dir: str) -> str | None:
    """The keep folder, made if missing (an object store has no folders to make); None for a
    store Spark cannot reach."""
    found = folder(run_dir)
    if found is not None:
        storage.make_folder(found)
    return found


def _files(found: str) -> dict[str, int]:
    """Every file under a keep folder on shared storage: path relative to it -> size (one listing)."""
    fs, path = storage.filesystem(found)
    fs.invalidate_cache(path)
    with storage.guard(found, "listing the kept shuffle files"):
        try:
            listed = fs.find(path, detail=True)
        except FileNotFoundError:
            return {}
    prefix = path.rstrip("/") + "/"
    return {name[len(prefix) :]: int(info.get("size") or 0) for name, info in listed.items() if name.startswith(prefix)}


def disk_usage(run_dir: str) -> int | None:
    """Bytes the kept map outputs hold (a hard-linked file counts once), or None when there are none."""
    found = folder(run_dir)
    if found is None:
        return None
    if not storage.is_local(found):
        files = _files(found)
        return sum(files.values()) if files else None
    if not os.path.isdir(found):
        return None
    total = 0
    seen: set[tuple[int, int]] = set()
    for base, _, names in os.walk(found):
        for name in names:
            try:
                info = os.stat(os.path.join(base, name))
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def size_reader(run_dir: str) -> Callable[[str], int | None] | None:
    """A ``path relative to the keep folder -> size, or None when missing`` reader: how the
    planner checks that a kept map output is still whole. On shared storage the folder is listed
    once, here. None for a store Spark cannot reach."""
    found = folder(run_dir)
    if found is None:
        return None
    if not storage.is_local(found):
        return _files(found).get
    base = found

    def size(relative: str) -> int | None:
        try:
            return os.stat(os.path.join(base, relative)).st_size
        except OSError:
            return None

    return size


def remove(run_dir: str) -> bool:
    """Delete the keep folder of a run (it succeeded, or starts from scratch), on any store. True
    when it held a kept map output (``<identity>/map-<index>...``): the folder is made before every
    attempt, and one whose shuffles kept nothing must not be reported as kept outputs removed."""
    found = folder(run_dir)
    if found is None:
        return False
    if storage.is_local(found):
        if not os.path.isdir(found):
            return False
        kept = bool(glob.glob(os.path.join(glob.escape(found), "*", "map-*")))
        shutil.rmtree(found, ignore_errors=True)
        return kept
    kept = any(_holds_map_output(relative) for relative in _files(found))
    return storage.remove_folder(found, "removing the kept shuffle files") and kept


def _holds_map_output(relative: str) -> bool:
    """Whether a file (path relative to the keep folder) belongs to a kept map output."""
    parts = relative.split("/")
    return len(parts) >= 3 and parts[1].startswith("map-")


def write_reuse_list(run_dir: str, attempt: int, reuse: list[KeptShuffle]) -> str:
    """The plan's validated kept map outputs for the JVM (``spark.sparkrecover.shuffle.reuse``),
    one tab-separated line each, in the keep folder (made if missing, on any store: a driver on a
    cluster reads it there); returns its name in the keep folder, which is how the JVM finds it.
    Written by the command line before it launches a resumed attempt, or by a driver a launcher
    restarted."""
    found = create(run_dir)
    if found is None:
        raise ValueError(f"the run directory {run_dir} keeps no map outputs: Spark cannot reach it")
    name = f"reuse-{attempt:04d}.tsv"
    lines = []
    for shuffle in reuse:
        for output in shuffle.maps:
            fields = (
                shuffle.shuffle,
                output.map,
                output.path,
                output.data_bytes,
                output.index_bytes,
                output.records,
                output.row_bytes,
            )
            lines.append("\t".join(str(item) for item in fields))
    storage.write_atomic(storage.join(found, name), ("\n".join(lines) + "\n").encode())
    return name


def sweep(run_dir: str, named: Iterable[str]) -> list[str]:
    """Remove the map output folders no journal record names (``named``: their paths relative to
    the keep folder): copies an executor lost or a killed driver never journaled, and what older
    versions laid out beside them. They would never be read; a resume sweeps them before it
    launches, so the keep folder holds only what the journal names. Returns what was removed."""
    found = folder(run_dir)
    if found is None:
        return []
    keep = set(named)
    if storage.is_local(found):
        folders = _local_folders(found)
    else:
        folders = sorted({_folder_of(relative) for relative in _files(found)} - {""})
    doomed = [relative for relative in folders if relative not in keep]
    if not doomed:
        return []
    if storage.is_local(found):
        for relative in doomed:
            shutil.rmtree(os.path.join(found, relative), ignore_errors=True)
    else:
        fs, path = storage.filesystem(found)
        with storage.guard(found, "removing unjournaled kept shuffle files"):
            fs.rm([posixpath.join(path, relative) for relative in doomed], recursive=True)
        fs.invalidate_cache(path)
    return doomed


def _folder_of(relative: str) -> str:
    """The map output folder (``<identity>/<folder>``) a kept file belongs to; "" for files at the
    top (the reuse lists) and beside the map outputs (a range partitioning's ``<identity>/bounds``)."""
    parts = relative.split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 else ""


def _local_folders(found: str) -> list[str]:
    if not os.path.isdir(found):
        return []
    folders = []
    for top in sorted(os.listdir(found)):
        path = os.path.join(found, top)
        if not os.path.isdir(path):
            continue
        if top.startswith("."):  # FallbackStorage's layout of older versions
            folders.append(top)
            continue
        folders += [f"{top}/{name}" for name in sorted(os.listdir(path)) if os.path.isdir(os.path.join(path, name))]
    return folders
