"""Stage fingerprints (docs/design.md §4 rule 5): what a stage's result depends on, recorded at
``stage.started`` and compared when a resumed driver reaches a stage the plan would skip.

A fingerprint holds one digest per ingredient so that a difference names its reason:
``version changed``, ``code changed``, ``plan changed``, ``input changed``, ``upstream changed``.
"""

from __future__ import annotations

import hashlib
import re
import types
from collections.abc import Iterable
from typing import Any

from sparkrecover.core.verdicts.staleness import INPUT_LIST_LIMIT, digest, stat_files
from sparkrecover.rundir import storage

# Expression ids (`id#12L`) and plan ids differ from one run of the same code to the next.
_PLAN_NOISE = re.compile(r"#\d+L?|plan_id=\d+|@[0-9a-f]{6,}")


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


def codedigest(fn: Any) -> str | None:
    """The digest of a function's code (its nested functions and lambdas included)."""
    function = getattr(fn, "__func__", fn)
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    sha = hashlib.sha256()
    _feed_code(sha, code)
    sha.update(repr(getattr(function, "__defaults__", None)).encode("utf-8", "backslashreplace"))
    return sha.hexdigest()[:32]


def canonical_plan(frame: Any) -> str | None:
    """The analyzed logical plan with run-specific noise removed; None where there is no JVM
    plan to read (Spark Connect). An RDD's stand-in (``zerocode.RDDSource``) gives its own."""
    if callable(getattr(type(frame), "canonical_plan", None)):  # never a DataFrame's column
        return frame.canonical_plan()
    try:
        text = frame._jdf.queryExecution().analyzed().toString()
    except Exception:
        return None
    return _PLAN_NOISE.sub("", text)


def input_files(frame: Any) -> list[str]:
    """The files a DataFrame reads, as Spark names them, seen through caches: Spark's own
    ``inputFiles()`` walks the optimized plan, where a cached DataFrame is its in-memory relation
    and lists no file, so a changed input would not make what reads it stale. The analyzed plan's
    file relations are read as well (no job: their file index was listed when the DataFrame was
    made). An RDD's stand-in (``zerocode.RDDSource``) lists its own."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return list(frame.inputFiles())
    found = list(listing_view(frame).inputFiles())
    seen = set(found)  # a large input lists thousands of files: no list scan per file
    try:
        leaves = jdf.queryExecution().analyzed().collectLeaves().iterator()
        while leaves.hasNext():
            for name in map(str, _relation_files(leaves.next())):
                if name not in seen:
                    seen.add(name)
                    found.append(name)
    except Exception:  # Spark Connect, a plan of another shape: what inputFiles() said
        pass
    return found


def listing_view(frame: Any) -> Any:
    """A DataFrame of the same rows to ask ``inputFiles()`` of: Spark keeps the first optimized
    plan a DataFrame makes, so asking the script's own would leave it blind to a ``cache()`` the
    script adds next (it would read its files again, never its cache)."""
    try:
        return frame.select("*")
    except Exception:  # a DataFrame of another kind: its own
        return frame


def _relation_files(leaf: Any) -> list[str]:
    kind = leaf.getClass().getSimpleName()
    if kind == "LogicalRelation":
        relation = leaf.relation()
        if relation.getClass().getSimpleName() == "HadoopFsRelation":
            return list(relation.location().inputFiles())
    elif kind == "DataSourceV2Relation":
        table = leaf.table()
        if hasattr(table, "fileIndex"):
            return list(table.fileIndex().inputFiles())
    return []


def build(
    *,
    version: str | None,
    fn: Any = None,
    frame: Any = None,
    input_urls: Iterable[str] = (),
    upstream: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A fingerprint: one digest per ingredient plus an overall digest."""
    inputs = stat_files(input_urls, storage.data_stat)
    plan = canonical_plan(frame) if frame is not None else None
    parts = {
        "version": None if version is None else str(version),
        "code": codedigest(fn) if fn is not None else None,
        "plan": digest(plan) if plan is not None else None,
        "input": digest(inputs),
        "upstream": digest(sorted((upstream or {}).items())),
    }
    fingerprint: dict[str, Any] = dict(parts)
    fingerprint["digest"] = digest(sorted(parts.items()))
    fingerprint["upstream_stages"] = dict(upstream or {})
    if len(inputs) <= INPUT_LIST_LIMIT:
        fingerprint["input_files"] = inputs
    return fingerprint
