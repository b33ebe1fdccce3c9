"""What names an action across attempts (docs/design.md §4c): where it was called — the write rule:
the user's file and line, and the how-manieth call of that action there — and what it computes:
the canonical plan (an RDD's lineage) and the files it reads, as a fingerprint whose difference
names its reason (``plan changed``, ``input changed``), as a stage's does.

A seed Spark drew for ``rand()``, ``randn()``, ``uuid()``, ``shuffle()`` or ``sample()`` without
one is drawn anew by every driver: it is left out of the plan's digest, or no action over a random
column could ever be replayed — and replaying the value attempt 1 saw is the point there
(docs/decisions/ records it).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from sparkrecover.core.verdicts.staleness import INPUT_LIST_LIMIT, digest, stat_files
from sparkrecover.driver.lifecycle import fingerprints
from sparkrecover.driver.process import runtime
from sparkrecover.driver.recording import zerocode
from sparkrecover.rundir import storage

_SEEDS = (
    (re.compile(r"\b(rand|randn)\(-?\d+L?\)"), r"\1(seed)"),
    (re.compile(r"\b(uuid|shuffle)\((.*?)Some\(-?\d+L?\)\)"), r"\1(\2Some(seed))"),
    (re.compile(r"^(\s*(?:[|:+-]\s*)*Sample [^,\n]+, [^,\n]+, [^,\n]+, )-?\d+", re.MULTILINE), r"\1seed"),
)
_lock = threading.Lock()


@dataclass
class Action:
    """One call of an action, as the journal and the plan name it."""

    key: str  # "etl.py:12#1 count()": call site, ordinal, the action and its arguments
    kind: str  # count, collect, show, ... (rdd.count for an RDD's)
    call_site: str
    fingerprint: dict[str, Any]


def without_seeds(plan: str) -> str:
    for pattern, replacement in _SEEDS:
        plan = pattern.sub(replacement, plan)
    return plan


def fingerprint(source: Any, code: list[str] | None = None) -> dict[str, Any]:
    """The fingerprint of what an action computes over ``source`` (a DataFrame, or
    ``zerocode.RDDSource`` for an RDD): no Spark job, only the analyzed plan and a file listing;
    ``code``: the digests of the functions and collections passed to the action, when any."""
    plan = fingerprints.canonical_plan(source)
    files = fingerprints.input_files(source)
    inputs = stat_files((storage.from_spark_path(path) for path in files), storage.data_stat)
    parts = {"plan": digest(without_seeds(plan)) if plan is not None else None, "input": digest(inputs)}
    if code:
        parts["code"] = digest(code)
    found: dict[str, Any] = dict(parts, digest=digest(sorted(parts.items())))
    if len(inputs) <= INPUT_LIST_LIMIT:
        found["input_files"] = inputs
    return found


def identify(rt: runtime.Runtime, kind: str, arguments: str, source: Any, code: list[str] | None = None) -> Action:
    """The action about to run, its ordinal counted (every call counts, replayed or not, so the
    same call gets the same key in every attempt); ``code`` as ``fingerprint`` takes it."""
    site = zerocode.user_site()
    label = f"{kind}({arguments})"
    with _lock:
        ordinal = rt.action_ordinals.get((site, label), 0) + 1
        rt.action_ordinals[(site, label)] = ordinal
    return Action(f"{site}#{ordinal} {label}", kind, site, fingerprint(source, code))
