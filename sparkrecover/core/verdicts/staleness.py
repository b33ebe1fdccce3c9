"""Staleness (docs/design.md §4 rule 5): how a stage's recorded fingerprint compares with the stage now.

The driver builds fingerprints (``driver.lifecycle.fingerprints``); this module holds what both processes
need of them: the digest, the input-file listing, the named difference the driver reports, and
the input check the command line makes before launch.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from typing import Any

# Above this many input files the list is kept as a digest only: the driver still compares it,
# the CLI cannot check it before launch.
INPUT_LIST_LIMIT = 10_000
REASONS = ("version", "code", "plan", "input", "upstream")


def digest(*parts: Any) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(repr(part).encode("utf-8", "backslashreplace"))
        sha.update(b"\x00")
    return sha.hexdigest()[:32]


def script_digest(script: str, read: Callable[[str], bytes]) -> str:
    """Is the script the same? The one answer both processes give: a digest of its bytes, every
    one of them (a Python function's body is not in Spark's plans, and an edit anywhere may change
    what a UDF computes). The driver salts a write's shape with it (driver/tasks/taskresume.py), submit
    hands it to the JVM for the shuffle identity (launch/shuffles.py). ``read`` reads the script
    (``rundir/storage.read_bytes``); a script it cannot read gets a digest no other attempt has,
    so nothing an earlier attempt kept is reused on a guess."""
    try:
        source = read(script)
    except Exception:
        return "unreadable-" + uuid.uuid4().hex
    return hashlib.sha256(source).hexdigest()


Stat = Callable[[str], "tuple[int, Any]"]


def stat_files(urls: Iterable[str], stat: Stat) -> list[list[Any]]:
    """[url, size, mtime] of each file, sorted; a file that vanished has size -1."""
    rows = []
    for url in sorted(set(urls)):
        try:
            size, mtime = stat(url)
        except (FileNotFoundError, OSError):
            size, mtime = -1, None
        rows.append([url, size, mtime])
    return rows


def difference(recorded: dict[str, Any] | None, current: dict[str, Any], ignore: Iterable[str] = ()) -> str | None:
    """The reason a stage is stale (``"code changed"``), or None when nothing it depends on changed.

    An ingredient the recorded fingerprint does not have (an older sparkrecover, Spark Connect)
    is not compared: unknown is not a change.
    """
    if not recorded or "digest" not in recorded:
        return None
    skip = set(ignore)
    for part in REASONS:
        if part in skip or recorded.get(part) is None or current.get(part) is None:
            continue
        if recorded[part] != current[part]:
            if part == "upstream":
                changed = sorted(
                    name
                    for name, digest in current.get("upstream_stages", {}).items()
                    if recorded.get("upstream_stages", {}).get(name) != digest
                )
                return f"upstream changed ({', '.join(changed)})" if changed else "upstream changed"
            return f"{part} changed"
    return None


def changed_inputs(recorded: dict[str, Any] | None, stat: Stat) -> list[str]:
    """Input files recorded in a fingerprint that are gone or differ now (the CLI's check)."""
    changed = []
    for url, size, mtime in (recorded or {}).get("input_files") or []:
        try:
            now = stat(url)
        except (FileNotFoundError, OSError):
            now = (-1, None)
        if [now[0], now[1]] != [size, mtime]:
            changed.append(url)
    return changed
