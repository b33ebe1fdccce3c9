"""Versions of the run directory's files other than the journal: plans, ``lease.json`` and
externalized manifests each carry ``v`` like the journal's envelope (docs/design.md §5).

A reader refuses a version it does not know with one line and exit 3, so an older sparkrecover
never acts on a file a newer one wrote. A file without ``v`` was written before the files carried
one; its shape is version 1.
"""

from __future__ import annotations

from typing import Any

from sparkrecover.errors import FormatError

PLAN = ("plan", 1)
LEASE = ("lease", 1)
MANIFEST = ("manifest", 1)


def stamped(kind: tuple[str, int], document: dict[str, Any]) -> dict[str, Any]:
    """The document with its format version first, as writers store it."""
    return {"v": kind[1], **{key: value for key, value in document.items() if key != "v"}}


def checked(kind: tuple[str, int], document: Any, where: str) -> dict[str, Any]:
    """The document, if this sparkrecover reads its version; else ``FormatError`` (exit 3)."""
    name, version = kind
    if not isinstance(document, dict):
        raise FormatError(f"{where}: not a {name} file (expected a JSON object)")
    found = document.get("v", 1)
    if found == version:
        return document
    if isinstance(found, int) and not isinstance(found, bool) and found > version:
        raise FormatError(
            f"{where}: {name} written in format v{found}; this sparkrecover reads "
            f"v{version}: upgrade sparkrecover to read it"
        )
    raise FormatError(f"{where}: unknown {name} format version {found!r}")
