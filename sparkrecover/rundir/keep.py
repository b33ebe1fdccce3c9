"""The keep folder: where a run's kept shuffle map outputs live, from its creation to its removal
(docs/shuffles.md).

``<run>/shuffles/`` holds the map outputs the keeping shuffle manager kept (as hard links or
copies), the reuse lists handed to the JVM and FallbackStorage's root. Both processes need it:
the command line creates it before an attempt, measures it for ``inspect`` and checks kept files
for the planner; whichever process sees the run succeed (or a resume start from scratch) removes
it, and that may be a driver restarted by a launcher with no command line around. Local folders
only: a run directory on any other store keeps no map outputs.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import KeptShuffle

FOLDER = "shuffles"  # under the run directory


def folder(run_dir: str) -> str | None:
    """The local folder kept map outputs live in, or None when the run directory is not local."""
    fs, path = storage.filesystem(run_dir)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol not in ("file", "local"):
        return None
    return os.path.join(path, FOLDER)


def create(run_dir: str) -> str | None:
    """The keep folder, made if missing; None when the run directory is not local."""
    found = folder(run_dir)
    if found is not None:
        os.makedirs(found, exist_ok=True)
    return found


def disk_usage(run_dir: str) -> int | None:
    """Bytes the kept map outputs hold (hard links count in full), or None when there are none."""
    found = folder(run_dir)
    if found is None or not os.path.isdir(found):
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
    planner checks that a kept map output is still whole. None when the run directory is not local."""
    found = folder(run_dir)
    if found is None:
        return None
    base = found

    def size(relative: str) -> int | None:
        try:
            return os.stat(os.path.join(base, relative)).st_size
        except OSError:
            return None

    return size


def remove(run_dir: str) -> bool:
    """Delete the keep folder of a run (it succeeded, or starts from scratch). True when it held a
    kept map output (``<identity>/map-<index>``): the folder is made before every attempt, and
    one whose shuffles kept nothing must not be reported as kept outputs removed."""
    found = folder(run_dir)
    if found is None or not os.path.isdir(found):
        return False
    kept = bool(glob.glob(os.path.join(glob.escape(found), "*", "map-*")))
    shutil.rmtree(found, ignore_errors=True)
    return kept


def write_reuse_list(run_dir: str, attempt: int, reuse: list[KeptShuffle]) -> str:
    """The plan's validated kept map outputs for the JVM (``spark.sparkrecover.shuffle.reuse``),
    one tab-separated line each, in the keep folder (made if missing); returns its path. Written
    by the command line before it launches a resumed attempt, or by a driver a launcher restarted."""
    found = create(run_dir)
    if found is None:
        raise ValueError(f"the run directory {run_dir} keeps no map outputs: it is not a local folder")
    path = os.path.join(found, f"reuse-{attempt:04d}.tsv")
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
    scratch = path + ".tmp"
    with open(scratch, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(scratch, path)
    return path
