"""Stage fingerprints (DESIGN §4 rule 5): what a stage's result depends on, recorded at
``stage.started`` and compared when a resumed driver reaches a stage the plan would skip.

A fingerprint holds one digest per ingredient so that a difference names its reason:
``version changed``, ``code changed``, ``plan changed``, ``input changed``, ``upstream changed``.
"""
from __future__ import annotations

import hashlib
import re
import types
from typing import Any, Callable, Iterable, Optional

from sparkrecover import storage

# Expression ids (`id#12L`) and plan ids differ from one run of the same code to the next.
_PLAN_NOISE = re.compile(r"#\d+L?|plan_id=\d+|@[0-9a-f]{6,}")
# Above this many input files the list is kept as a digest only: the driver still compares it,
# the CLI cannot check it before launch.
INPUT_LIST_LIMIT = 10_000
REASONS = ("version", "code", "plan", "input", "upstream")


def _digest(*parts: Any) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(repr(part).encode("utf-8", "backslashreplace"))
        sha.update(b"\x00")
    return sha.hexdigest()[:32]


def _feed_code(sha: Any, code: types.CodeType) -> None:
    # Bytecode, names and constants; not file names or line numbers, which move when code
    # above the function is edited.
    sha.update(code.co_code)
    sha.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_argcount)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(sha, const)
        elif isinstance(const, frozenset):  # set literal order follows string hashing: randomized
            sha.update(repr(sorted(map(repr, const))).encode())
        else:
            sha.update(repr(const).encode("utf-8", "backslashreplace"))


def code_digest(fn: Any) -> Optional[str]:
    """The digest of a function's code (its nested functions and lambdas included)."""
    function = getattr(fn, "__func__", fn)
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    sha = hashlib.sha256()
    _feed_code(sha, code)
    sha.update(repr(getattr(function, "__defaults__", None)).encode("utf-8", "backslashreplace"))
    return sha.hexdigest()[:32]


def canonical_plan(frame: Any) -> Optional[str]:
    """The analyzed logical plan with run-specific noise removed; None where there is no JVM
    plan to read (Spark Connect)."""
    try:
        text = frame._jdf.queryExecution().analyzed().toString()
    except Exception:  # noqa: BLE001 - no classic DataFrame: the other ingredients still count
        return None
    return _PLAN_NOISE.sub("", text)


def stat_files(urls: Iterable[str]) -> list[list[Any]]:
    """[url, size, mtime] of each file, sorted; a file that vanished has size -1."""
    rows = []
    for url in sorted(set(urls)):
        try:
            size, mtime = storage.stat(url)
        except (FileNotFoundError, OSError):
            size, mtime = -1, None
        rows.append([url, size, mtime])
    return rows


def build(*, version: Optional[str], fn: Any = None, frame: Any = None,
          input_urls: Iterable[str] = (), upstream: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """A fingerprint: one digest per ingredient plus an overall digest."""
    inputs = stat_files(input_urls)
    plan = canonical_plan(frame) if frame is not None else None
    parts = {
        "version": None if version is None else str(version),
        "code": code_digest(fn) if fn is not None else None,
        "plan": _digest(plan) if plan is not None else None,
        "input": _digest(inputs),
        "upstream": _digest(sorted((upstream or {}).items())),
    }
    fingerprint: dict[str, Any] = dict(parts)
    fingerprint["digest"] = _digest(sorted(parts.items()))
    fingerprint["upstream_stages"] = dict(upstream or {})
    if len(inputs) <= INPUT_LIST_LIMIT:
        fingerprint["input_files"] = inputs
    return fingerprint


def difference(recorded: Optional[dict[str, Any]], current: dict[str, Any],
               ignore: Iterable[str] = ()) -> Optional[str]:
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
                changed = sorted(name for name, digest in current.get("upstream_stages", {}).items()
                                 if recorded.get("upstream_stages", {}).get(name) != digest)
                return f"upstream changed ({', '.join(changed)})" if changed else "upstream changed"
            return f"{part} changed"
    return None


def changed_inputs(recorded: Optional[dict[str, Any]], stat: Callable[[str], tuple[int, Any]] = None) -> list[str]:
    """Input files recorded in a fingerprint that are gone or differ now (the CLI's check)."""
    stat = stat or storage.stat
    changed = []
    for url, size, mtime in (recorded or {}).get("input_files") or []:
        try:
            now = stat(url)
        except (FileNotFoundError, OSError):
            now = (-1, None)
        if [now[0], now[1]] != [size, mtime]:
            changed.append(url)
    return changed
