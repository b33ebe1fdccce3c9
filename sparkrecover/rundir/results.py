"""The results folder: ``<run dir>/results/<attempt:04d>/<n:06d>.json`` (``.arrow`` for a
``toPandas`` through Arrow, ``model-<digest>/`` folders for trained models), the kept results of the
run's actions (docs/replay.md), written by the driver (``driver/recall/recorder.py``), offered to
a resume by the planner (``core/verdicts/action_reuse.py``), and removed with the kept shuffle files when
the run succeeds (they hold the application's data: a collect's rows, what show printed).
"""

from __future__ import annotations

from collections.abc import Callable

from sparkrecover.rundir import storage

FOLDER = "results"


def path_of(attempt: int, number: int, suffix: str = "json") -> str:
    """A result file's path relative to the run directory."""
    return f"{FOLDER}/{attempt:04d}/{number:06d}.{suffix}"


def url_of(run_dir: str, path: str) -> str:
    return storage.join(run_dir, *path.split("/"))


def size_reader(run_dir: str) -> Callable[[str], int | None]:
    """The size of each result file by its relative path, listed once (one listing on an object
    store, not one request per action); None for a file that is not there."""
    found: dict[str, int] | None = None

    def size(relative: str) -> int | None:
        nonlocal found
        if found is None:
            found = _sizes(run_dir)
        return found.get(relative)

    return size


def _sizes(run_dir: str) -> dict[str, int]:
    folder = storage.join(run_dir, FOLDER)
    fs, path = storage.filesystem(folder)
    try:
        listed = fs.find(path, detail=True)
    except (FileNotFoundError, OSError):
        return {}
    base = path.rstrip("/") + "/"
    return {
        f"{FOLDER}/{name[len(base) :]}": int(info.get("size") or 0)
        for name, info in listed.items()
        if name.startswith(base) and info.get("type") != "directory"
    }


def folder_bytes(run_dir: str, folder: str) -> int:
    """The bytes of the files under ``folder`` (relative to the run directory): a trained model's
    folder, counted once when it is kept (one listing), so ``inspect`` can say what it holds."""
    fs, path = storage.filesystem(url_of(run_dir, folder))
    listed = fs.find(path, detail=True)
    return sum(int(info.get("size") or 0) for info in listed.values() if info.get("type") != "directory")


def remove(run_dir: str) -> bool:
    """Delete the run's results (it succeeded, or starts from scratch); True when there were any."""
    return storage.remove_folder(storage.join(run_dir, FOLDER), "removing the recorded action results")
