"""Output manifests: what a stage's outputs held when it committed, and whether they still do.

A manifest lists an output's data files (path relative to the output, size, and with
``--checksums`` a SHA-256 of the content) and whether a ``_SUCCESS`` marker was there. Hidden
files (``.part-0.crc``) and ``_``-prefixed bookkeeping (``_temporary``, ``_SUCCESS``) are not data.

Verification levels (``resume --verify``):
- ``size`` (default): every recorded file is still there with its size, no new data file
  appeared, ``_SUCCESS`` is still there if it was. Costs one listing per output.
- ``footer``: also reads the first and last bytes of each Parquet and ORC file and checks their
  magic (``PAR1``, ``ORC``): a truncated or overwritten file fails. Costs two small reads per file.
- ``checksum``: also recomputes each file's SHA-256 and compares it with the digest recorded at
  commit (``submit --checksums``): reads every byte of every output twice over the run's life,
  once at commit and once per verification. Files committed without a digest get the footer check.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

import orjson

from sparkrecover.errors import FormatError
from sparkrecover.rundir import formats, storage

SUCCESS_MARKER = "_SUCCESS"
# Above this many files a manifest goes to manifests/<stage>.json instead of the journal line.
INLINE_FILE_LIMIT = 1000
VERIFY_LEVELS = ("size", "footer", "checksum")
_CHUNK = 8 << 20


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
    fs, path = storage.data_filesystem(url)
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
        relative = name[len(prefix) :] if name.startswith(prefix) else name
        if relative == SUCCESS_MARKER:
            success = True
        elif _is_data(relative):
            files[relative] = int(info.get("size") or 0)
    return files, success, True


def _file_url(url: str, name: str) -> str:
    return storage.join(url, name) if name else url


def sha256_of(url: str) -> str:
    digest = hashlib.sha256()
    fs, path = storage.data_filesystem(url)
    with fs.open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def footer_problem(url: str, size: int) -> str | None:
    """Why a Parquet/ORC file's magic bytes are wrong, or None (also for other formats)."""
    name = url.rsplit("/", 1)[-1].lower()
    if ".parquet" in name:
        head_magic, tail_magic = b"PAR1", b"PAR1"
    elif name.endswith(".orc") or ".orc." in name:
        head_magic, tail_magic = b"ORC", None
    else:
        return None
    if size < 8:
        return f"{url} is too short to be a {'Parquet' if tail_magic else 'ORC'} file"
    fs, path = storage.data_filesystem(url)
    with fs.open(path, "rb") as handle:
        head = handle.read(len(head_magic))
        tail = b""
        if tail_magic:
            handle.seek(size - len(tail_magic))
            tail = handle.read(len(tail_magic))
    if head != head_magic or (tail_magic and tail != tail_magic):
        return f"{url} has a damaged {'Parquet' if tail_magic else 'ORC'} header or footer"
    return None


def build_output(url: str, spark_path: str | None = None, checksums: bool = False) -> dict[str, Any]:
    files, success, exists = list_files(url)
    entries = []
    for name, size in sorted(files.items()):
        entries.append([name, size, sha256_of(_file_url(url, name))] if checksums else [name, size])
    output: dict[str, Any] = {
        "path": url,
        "files": entries,
        "file_count": len(files),
        "bytes": sum(files.values()),
        "success": success,
    }
    if spark_path:
        output["spark_path"] = spark_path
    if not exists:
        output["absent"] = True  # nothing there (a dropped table's folder): what must stay so
    return output


def added_files(output: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """The part of an output an append added: its manifest checks those files only, so a later
    append to the same place does not make this one look changed."""
    held = {entry[0]: entry[1] for entry in before.get("files") or []}
    entries = [entry for entry in output["files"] if held.get(entry[0]) != entry[1]]
    return {
        **output,
        "files": entries,
        "file_count": len(entries),
        "bytes": sum(entry[1] for entry in entries),
        "scope": "added",
    }


def externalize(stage: str, manifest: list[dict[str, Any]], run_dir: str) -> tuple[list, str | None, str | None]:
    """Move file lists of large manifests to manifests/<stage>.json; returns the journal's view.

    The file's digest goes into the journal so a manifest file rewritten by a later, unfinished
    attempt is never mistaken for the one this commit recorded.
    """
    if sum(out["file_count"] for out in manifest) <= INLINE_FILE_LIMIT:
        return manifest, None, None
    data = orjson.dumps(formats.stamped(formats.MANIFEST, {"stage": stage, "outputs": manifest}))
    ref = f"manifests/{manifest_file_name(stage)}"
    storage.write_atomic(storage.join(run_dir, ref), data)
    summary = [{k: v for k, v in out.items() if k != "files"} for out in manifest]
    return summary, ref, hashlib.sha256(data).hexdigest()


def manifest_file_name(stage: str) -> str:
    """A safe file name for a stage: quoted, and shortened with a digest when long (the names of
    implicit stages hold whole paths; file systems allow 255 bytes)."""
    from urllib.parse import quote

    quoted = quote(stage, safe="")
    if len(quoted) > 150:
        quoted = quoted[:100] + "-" + hashlib.sha256(stage.encode("utf-8")).hexdigest()[:32]
    return quoted + ".json"


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
    where = storage.join(run_dir, ref)
    try:
        document = formats.checked(formats.MANIFEST, orjson.loads(data), where)
    except orjson.JSONDecodeError:
        raise FormatError(f"{where}: the manifest is not valid JSON") from None
    outputs = document.get("outputs")
    if not isinstance(outputs, list):
        raise FormatError(f"{where}: the manifest has no list of outputs")
    return outputs


def verify_output(output: dict[str, Any], level: str = "size") -> list[str]:
    """Problems found in one recorded output; empty when it still matches its manifest."""
    url = output["path"]
    current, success, exists = list_files(url)
    if output.get("absent"):
        return [f"{url} is there again"] if exists and current else []
    if not exists:
        return [f"{url} is gone"]
    problems = []
    for entry in output.get("files") or []:
        name, size = entry[0], entry[1]
        where = _file_url(url, name)
        if name not in current:
            problems.append(f"{where} is missing")
        elif current[name] != size:
            problems.append(f"{where} changed size ({size} -> {current[name]} bytes)")
        elif level == "checksum" and len(entry) > 2:
            if sha256_of(where) != entry[2]:
                problems.append(f"{where} changed content (checksum differs)")
        elif level in ("footer", "checksum"):
            problem = footer_problem(where, size)
            if problem:
                problems.append(problem)
    recorded = {entry[0] for entry in output.get("files") or []}
    # An append owns only the files it added: other files there are someone else's.
    extra = sorted(set(current) - recorded) if output.get("scope") != "added" else []
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
    kept = {entry[0] for entry in before.get("files") or []}
    removed = []
    fs, _ = storage.data_filesystem(url)
    for name in sorted(set(current) - kept):
        target = storage.join(url, name) if name else url
        fs.rm(storage.data_filesystem(target)[1])
        removed.append(target)
    if not before.get("success"):
        marker = storage.join(url, SUCCESS_MARKER)
        if storage.data_exists(marker):
            fs.rm(storage.data_filesystem(marker)[1])
    return removed
