"""Kept shuffle map outputs in the run state, and which of them a resume may reuse
(docs/shuffles.md).

The journal says which map outputs were kept (``shuffle.committed``, written after the files were
renamed into place) and how many map tasks each shuffle has (``shuffle.registered``). A map output
is offered to the next attempt only when the record and the evidence agree: its files exist under
the keep folder with the sizes the record gives. The JVM checks again (index offsets against the
data's size, and the shuffle's identity) when the new application registers the shuffle; whatever
fails either check is computed again, which is always safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.rundir.plans import KeptMap, KeptShuffle

# path relative to the keep folder -> its size in bytes, or None when it does not exist.
SizeOf = Callable[[str], "int | None"]
_MAP_FIELDS = ("map", "path", "data_bytes", "index_bytes", "records", "row_bytes")


@dataclass
class ShuffleState:
    """One shuffle identity across the run's attempts."""

    identity: str
    stage: str | None = None  # the pipeline stage it ran for (None outside any)
    maps: int = 0
    reduces: int = 0
    kept: dict[int, dict[str, Any]] = field(default_factory=dict)  # map index -> its record
    reused: dict[int, int] = field(default_factory=dict)  # attempt -> map outputs reused
    attempts: list[int] = field(default_factory=list)
    refused: str | None = None  # why the last registration reused nothing, when it had kept ones
    # What keeping cost the executors, over every map output kept (microseconds): on the map
    # tasks' threads, and in the background copies to the keep folder.
    keep_us: int = 0
    copy_us: int = 0

    @property
    def kept_count(self) -> int:
        return len(self.kept)


@dataclass
class Unsupported:
    attempt: int
    reason: str
    stage: str | None = None
    spark_shuffle: int | None = None


def on_registered(shuffles: dict[str, ShuffleState], record: dict[str, Any]) -> None:
    state = shuffles.get(record["shuffle"])
    if state is None:
        state = shuffles[record["shuffle"]] = ShuffleState(record["shuffle"])
    state.stage = record.get("stage") if state.stage is None else state.stage
    state.maps, state.reduces = int(record["maps"]), int(record["reduces"])
    if record["attempt"] not in state.attempts:
        state.attempts.append(record["attempt"])
    state.reused[record["attempt"]] = state.reused.get(record["attempt"], 0) + int(record.get("reused") or 0)
    state.refused = record.get("reuse_refused") or None


def on_committed(shuffles: dict[str, ShuffleState], record: dict[str, Any]) -> None:
    state = shuffles.get(record["shuffle"])
    if state is None:
        state = shuffles[record["shuffle"]] = ShuffleState(record["shuffle"], stage=record.get("stage"))
    for entry in record["maps"]:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), (int, str)) for k in _MAP_FIELDS):
            continue  # a map output the record does not describe whole is not reused
        state.kept[int(entry["map"])] = {key: entry[key] for key in _MAP_FIELDS}
        state.keep_us += _micros(entry.get("keep_us"))
        state.copy_us += _micros(entry.get("copy_us"))


def _micros(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def reusable(shuffles: dict[str, ShuffleState], size_of: SizeOf | None) -> list[KeptShuffle]:
    """The kept map outputs whose files are there with their recorded sizes, per shuffle (the
    plan's ``shuffles``)."""
    if size_of is None:
        return []
    plan = []
    for state in shuffles.values():
        good = [_kept_map(entry) for _, entry in sorted(state.kept.items()) if intact(entry, size_of)]
        if good:
            plan.append(KeptShuffle(state.identity, state.stage, good))
    return plan


def _kept_map(entry: dict[str, Any]) -> KeptMap:
    return KeptMap(
        map=int(entry["map"]),
        path=str(entry["path"]),
        data_bytes=int(entry["data_bytes"]),
        index_bytes=int(entry["index_bytes"]),
        records=int(entry["records"]),
        row_bytes=int(entry["row_bytes"]),
    )


def intact(entry: dict[str, Any], size_of: SizeOf) -> bool:
    """The files of one kept map output, as the record says they were kept. The folder name is
    data from the journal: only a plain relative path is followed (docs/design.md §4 rule 8)."""
    folder = str(entry["path"])
    if folder.startswith("/") or ".." in folder.split("/"):
        return False
    data = size_of(f"{folder}/data")
    if (data or 0) != int(entry["data_bytes"]):  # an empty map output may have no data file
        return False
    return size_of(f"{folder}/index") == int(entry["index_bytes"]) and size_of(f"{folder}/meta") is not None


def progress_of_stage(shuffles: dict[str, ShuffleState], stage: str, offered: list[KeptShuffle]) -> tuple[int, int]:
    """(map outputs the plan offers, map tasks) over the shuffles a pipeline stage ran."""
    offered_by = {entry.shuffle: len(entry.maps) for entry in offered}
    kept = total = 0
    for state in shuffles.values():
        if state.stage == stage and state.maps:
            total += state.maps
            kept += min(offered_by.get(state.identity, 0), state.maps)
    return kept, total


def describe(state: ShuffleState) -> str:
    """``12/24 map outputs kept`` (and what the last attempt reused), for the views."""
    text = f"{state.kept_count}/{state.maps or '?'} map outputs kept"
    reused = state.reused.get(max(state.reused)) if state.reused else 0
    if reused:
        text += f", {reused} reused by attempt {max(state.reused)}"
    return text


def rows(shuffles: dict[str, ShuffleState]) -> list[dict[str, Any]]:
    """Map progress per shuffle, as ``inspect --json`` shows it."""
    return [
        {
            "shuffle": state.identity,
            "stage": state.stage,
            "maps": state.maps,
            "kept": state.kept_count,
            "kept_bytes": sum(int(entry["data_bytes"]) + int(entry["index_bytes"]) for entry in state.kept.values()),
            "reused": {str(attempt): count for attempt, count in sorted(state.reused.items())},
            # What keeping cost: seconds on the map tasks' threads, and of background copying.
            "keep_seconds": round(state.keep_us / 1e6, 3),
            "copy_seconds": round(state.copy_us / 1e6, 3),
        }
        for state in shuffles.values()
    ]


def stage_progress(shuffles: dict[str, ShuffleState], stage: str) -> tuple[int, int]:
    """(map outputs kept, map tasks) over the shuffles a pipeline stage ran, as the journal says."""
    kept = total = 0
    for state in shuffles.values():
        if state.stage == stage and state.maps:
            total += state.maps
            kept += min(state.kept_count, state.maps)
    return kept, total
