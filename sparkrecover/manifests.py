"""Output manifests: what a stage's outputs held when it committed, and whether they still do.

A manifest lists an output's data files (path relative to the output, size) and whether a
``_SUCCESS`` marker was there. Hidden files (``.part-0.crc``) and ``_``-prefixed bookkeeping
(``_temporary``, ``_SUCCESS``) are not data. Verification (``--verify size``, the default)
checks that every recorded file is still there with its size, that no new data file appeared,
and that ``_SUCCESS`` is still there if it was.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable

import orjson

from sparkrecover import storage

SUCCESS_MARKER = "_SUCCESS"
# Above this many files a manifest goes to manifests/<stage>.json instead of the journal line.
INLINE_FILE_LIMIT = 1000
VERIFY_LEVELS = ("size",)


def _is_data(relative: str) -> bool:
    return not any(part.startswith((".", "_")) for part in relative.split("/"))


def list_files(url: str) -> tuple[dict[str, int], bool, bool]:
    """(data files -> size, whether _SUCCESS is there, whether the output exists at all)."""
    files: dict[str, int] = {}
    if storage.is_local(url):
        root = storage.normalize(url)
        if os.path.isfile(root):
            return {"": os.path.getsize(root)}, False, True
        if not os.path.isdir(root):
            return {}, False, False
        success = os.path.exists(os.path.join(root, SUCCESS_MARKER))
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            relative_folder = os.path.relpath(folder, root)
            for name in names:
                relative = name if relative_folder == "." else f"{relative_folder}/{name}"
                if _is_data(relative):
                    files[relative] = os.path.getsize(os.path.join(folder, name))
        return files, success, True
    fs, path = storage.filesystem(url)
    with storage.guard(url, "list"):
        return _list_remote(fs, path)


def _list_remote(fs: Any, path: str) -> tuple[dict[str, int], bool, bool]:
    # Spark (another process, or the JVM) wrote here since fsspec last looked: never trust its cache.
    fs.invalidate_cache(path)
    files: dict[str, int] = {}
    if not fs.exists(path):
        return {}, False, False
    if fs.isfile(path):
        return {"": int(fs.size(path))}, False, True
    prefix = path.rstrip("/") + "/"
    success = False
    for name, info in fs.find(path, detail=True).items():
        relative = name[len(prefix):] if name.startswith(prefix) else name
        if relative == SUCCESS_MARKER:
            success = True
        elif _is_data(relative):
            files[relative] = int(info.get("size") or 0)
    return files, success, True


def build_output(url: str, spark_path: str | None = None) -> dict[str, Any]:
    files, success, _ = list_files(url)
    output: dict[str, Any] = {
        "path": url,
        "files": sorted([name, size] for name, size in files.items()),
        "file_count": len(files),
        "bytes": sum(files.values()),
        "success": success,
    }
    if spark_path:
        output["spark_path"] = spark_path
    return output


def externalize(stage: str, manifest: list[dict[str, Any]], run_dir: str) -> tuple[list, str | None, str | None]:
    """Move file lists of large manifests to manifests/<stage>.json; returns the journal's view.

    The file's digest goes into the journal so a manifest file rewritten by a later, unfinished
    attempt is never mistaken for the one this commit recorded.
    """
    if sum(out["file_count"] for out in manifest) <= INLINE_FILE_LIMIT:
        return manifest, None, None
    data = orjson.dumps({"stage": stage, "outputs": manifest})
    ref = f"manifests/{manifest_file_name(stage)}"
    storage.write_atomic(storage.join(run_dir, ref), data)
    summary = [{k: v for k, v in out.items() if k != "files"} for out in manifest]
    return summary, ref, hashlib.sha256(data).hexdigest()


def manifest_file_name(stage: str) -> str:
    from urllib.parse import quote

    return quote(stage, safe="") + ".json"


def load_manifest(committed: dict[str, Any], run_dir: str) -> list[dict[str, Any]] | None:
    """The full manifest of a stage.committed event, or None when its manifest file is gone or
    no longer the one that was committed."""
    ref = committed.get("manifest_ref")
    if not ref:
        return list(committed.get("manifest") or [])
    try:
        data = storage.read_bytes(storage.join(run_dir, ref))
    except (FileNotFoundError, OSError):
        return None
    if hashlib.sha256(data).hexdigest() != committed.get("manifest_sha256"):
        return None
    return orjson.loads(data)["outputs"]


def verify_output(output: dict[str, Any], level: str = "size") -> list[str]:
    """Problems found in one recorded output; empty when it still matches its manifest."""
    url = output["path"]
    current, success, exists = list_files(url)
    if not exists:
        return [f"{url} is gone"]
    problems = []
    for name, size in output.get("files") or []:
        where = f"{url}/{name}" if name else url
        if name not in current:
            problems.append(f"{where} is missing")
        elif current[name] != size:
            problems.append(f"{where} changed size ({size} -> {current[name]} bytes)")
    recorded = {name for name, _ in output.get("files") or []}
    extra = sorted(set(current) - recorded)
    if extra:
        problems.append(f"{url}/{extra[0]} is new" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    if output.get("success") and not success:
        problems.append(f"{url}/{SUCCESS_MARKER} is missing")
    return problems


def verify_manifest(manifest: Iterable[dict[str, Any]], level: str = "size") -> list[str]:
    problems: list[str] = []
    for output in manifest:
        problems.extend(verify_output(output, level))
    return problems


def restore_output(before: dict[str, Any]) -> list[str]:
    """Remove data files that appeared in an output since ``before`` was recorded, so a stage that
    rerun after a partial or committed write never leaves its data there twice. Returns what was
    removed."""
    url = before["path"]
    current, _, exists = list_files(url)
    if not exists:
        return []
    kept = {name for name, _ in before.get("files") or []}
    removed = []
    fs, path = storage.filesystem(url)
    for name in sorted(set(current) - kept):
        target = storage.join(url, name) if name else url
        fs.rm(storage.filesystem(target)[1])
        removed.append(target)
    if not before.get("success"):
        marker = storage.join(url, SUCCESS_MARKER)
        if storage.exists(marker):
            fs.rm(storage.filesystem(marker)[1])
    return removed
