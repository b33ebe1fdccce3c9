"""Kept shuffle map outputs (docs/shuffles.md): every rule about them, once.

- The fold (``on_registered``, ``on_committed``, fed by the run state): which map outputs the
  journal says were kept (``shuffle.committed``, written after the files were renamed into place),
  which attempt computed each, how many map tasks each shuffle has and how many kept outputs each
  attempt reused (``shuffle.registered``).
- What a resume offers (``offer``): a kept map output whose record and evidence agree (its files
  under the keep folder with the sizes the record gives), of a shuffle the next attempt may plan
  again (one of a stage that runs, or one run outside any stage), made by the script the next
  attempt runs (the script is part of a shuffle's identity), and for a range partitioning whose
  kept bounds are still there. The JVM checks again (index offsets,
  the identity) when the new application registers the shuffle; whatever fails is computed again.
- The views, from evidence only: progress per stage (``progress``), ``inspect``'s rows, and which
  map outputs an attempt reused or computed (``cells``, ``report``'s grid). A map output counts as
  reused only in an attempt whose ``shuffle.registered`` says it reused some, never because a plan
  offered it: an identity the resumed application did not plan again reused nothing.

Pure: the keep folder is read through the ``size_of`` the caller hands in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkrecover.rundir.plans import KeptMap, KeptShuffle

# path relative to the keep folder -> its size in bytes, or None when it does not exist.
SizeOf = Callable[[str], "int | None"]
_MAP_FIELDS = ("map", "path", "data_bytes", "index_bytes", "records", "row_bytes")
# A map output's state in report's grid (the words of core/fold/kept_partitions.py's write cells).
KEPT, COMPUTED, UNFINISHED = "kept", "computed", "not finished"


@dataclass
class ShuffleState:
    """One shuffle identity across the run's attempts."""

    identity: str
    stage: str | None = None  # the pipeline stage it ran for (None outside any)
    maps: int = 0
    reduces: int = 0
    kept: dict[int, dict[str, Any]] = field(default_factory=dict)  # map index -> its latest record
    # map index -> every whole copy journaled of it, oldest first: a map stage that ran again (an
    # executor lost, a fetch failure) kept a second copy of the same map partition; of a
    # deterministic shuffle each is as good as the other, and a resume takes the newest intact one.
    copies: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    computed: dict[int, int] = field(default_factory=dict)  # map index -> the latest attempt that computed it
    reused: dict[int, int] = field(default_factory=dict)  # attempt -> map outputs reused
    attempts: list[int] = field(default_factory=list)  # the attempts that registered it
    refused: str | None = None  # why the last registration reused nothing, when it had kept ones
    script: str | None = None  # the digest of the script that registered it (part of the identity)
    # A range partitioning's: the digest of the bounds its map outputs were partitioned by, kept
    # beside them (``<identity>/bounds``); None for every other partitioning.
    bounds: str | None = None
    # attempt -> [when it registered the shuffle, when it kept its last map output] (epoch seconds)
    spans: dict[int, list[float]] = field(default_factory=dict)
    # What keeping cost the executors, over every map output kept (microseconds): on the map
    # tasks' threads, and in the background copies to the keep folder.
    keep_us: int = 0
    copy_us: int = 0

    @property
    def kept_count(self) -> int:
        return len(self.kept)

    def reused_by(self, attempt: int) -> int:
        return self.reused.get(attempt, 0)

    def seconds_computing(self, attempt: int) -> float:
        """How long ``attempt`` took from registering the shuffle to keeping its last map output."""
        span = self.spans.get(attempt)
        if not span or attempt not in self.computed.values():
            return 0.0
        return max(span[1] - span[0], 0.0)


@dataclass
class Unsupported:
    attempt: int
    reason: str
    stage: str | None = None
    spark_shuffle: int | None = None


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _state(shuffles: dict[str, ShuffleState], record: dict[str, Any]) -> ShuffleState:
    state = shuffles.get(record["shuffle"])
    if state is None:
        state = shuffles[record["shuffle"]] = ShuffleState(record["shuffle"], stage=record.get("stage"))
    # The JVM says when it registered the shuffle; a record's own time is when the driver journaled it.
    at = record["time_ms"] / 1000 if isinstance(record.get("time_ms"), int) else _seconds(record["ts"])
    span = state.spans.setdefault(record["attempt"], [at, at])
    span[0], span[1] = min(span[0], at), max(span[1], at)
    return state


def on_registered(shuffles: dict[str, ShuffleState], record: dict[str, Any]) -> None:
    state = _state(shuffles, record)
    state.stage = record.get("stage") if state.stage is None else state.stage
    state.maps, state.reduces = int(record["maps"]), int(record["reduces"])
    if record["attempt"] not in state.attempts:
        state.attempts.append(record["attempt"])
    state.reused[record["attempt"]] = state.reused_by(record["attempt"]) + int(record.get("reused") or 0)
    state.refused = record.get("reuse_refused") or None
    state.script = record.get("script") or state.script
    state.bounds = state.bounds or record.get("bounds") or None


def on_committed(shuffles: dict[str, ShuffleState], record: dict[str, Any]) -> None:
    state = _state(shuffles, record)
    for entry in record["maps"]:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), (int, str)) for k in _MAP_FIELDS):
            continue  # a map output the record does not describe whole is not reused
        copy = {key: entry[key] for key in _MAP_FIELDS}
        state.kept[int(entry["map"])] = copy
        state.copies.setdefault(int(entry["map"]), []).append(copy)
        state.computed[int(entry["map"])] = record["attempt"]
        state.keep_us += _micros(entry.get("keep_us"))
        state.copy_us += _micros(entry.get("copy_us"))


def _micros(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


# -- what a resume offers ----------------------------------------------------------------------


def reusable(shuffles: dict[str, ShuffleState], size_of: SizeOf | None) -> list[KeptShuffle]:
    """The kept map outputs whose files are there with their recorded sizes, per shuffle: of each
    map partition, the newest journaled copy that is whole, whichever attempt of the map stage
    (or of the run) wrote it."""
    if size_of is None:
        return []
    found = []
    for state in shuffles.values():
        good = [
            _kept_map(copy) for copy in (_whole_copy(state, index, size_of) for index in sorted(state.kept)) if copy
        ]
        if good:
            found.append(KeptShuffle(state.identity, state.stage, good))
    return found


def _whole_copy(state: ShuffleState, index: int, size_of: SizeOf) -> dict[str, Any] | None:
    copies = state.copies.get(index) or [state.kept[index]]
    return next((copy for copy in reversed(copies) if intact(copy, size_of)), None)


def named_folders(shuffles: dict[str, ShuffleState]) -> list[str]:
    """Every kept map output folder a journal record names (each copy of each map partition)."""
    return [str(copy["path"]) for state in shuffles.values() for copies in state.copies.values() for copy in copies]


@dataclass
class NotKept:
    """Why a shuffle's map outputs, or some of them, are not offered to the next attempt."""

    reason: str
    stage: str | None = None
    shuffle: str | None = None  # its identity; None for one refused before it had one
    spark_shuffle: int | None = None
    kept: int = 0  # map outputs offered all the same
    total: int = 0  # its map tasks (0: unknown)

    def summary(self) -> dict[str, Any]:
        return {
            "shuffle": self.shuffle,
            "spark_shuffle": self.spark_shuffle,
            "stage": self.stage,
            "kept": self.kept,
            "total": self.total,
            "reason": self.reason,
        }

    def describe(self) -> str:
        name = f"shuffle {self.shuffle[:12]}" if self.shuffle else f"Spark shuffle {self.spark_shuffle}"
        if self.shuffle is None and self.spark_shuffle is None:
            name = "shuffles"
        counted = f" ({self.kept}/{self.total} kept)" if self.total else ""
        return f"{name}{counted}: {self.reason}"


@dataclass
class Offer:
    """What the next attempt is offered (the plan's ``shuffles``), and, per shuffle, why map
    outputs are not offered (``not_kept``): refused, unfinished, missing, or made by another
    script."""

    shuffles: list[KeptShuffle]
    not_kept: list[NotKept] = field(default_factory=list)

    def not_kept_in(self, stage: str | None) -> list[NotKept]:
        return [entry for entry in self.not_kept if entry.stage == stage]


def offer(
    shuffles: dict[str, ShuffleState],
    size_of: SizeOf | None,
    running: Iterable[str],
    script: str | None = None,
    unsupported: Iterable[Unsupported] = (),
) -> Offer:
    """The kept map outputs the next attempt may reuse: those of shuffles of the stages that run
    (``running``) or of none, whose files are intact, and made by the script it runs (``script``,
    the digest of the script now; None when unknown). ``unsupported``: the run's refusals
    (``shuffle.unsupported``), said again for the shuffles of the stages that run."""
    stages = set(running)
    whole = {kept.shuffle: kept for kept in reusable(shuffles, size_of)}
    offered, why_not = [], []
    for state in shuffles.values():
        if state.stage is not None and state.stage not in stages:
            continue
        kept = whole.get(state.identity)
        refusal = _refusal(state, kept, size_of, script)
        if refusal is None and kept is not None:
            offered.append(kept)
        count = len(kept.maps) if kept is not None and refusal is None else 0
        reason = refusal or _shortfall(state, count)
        if reason:
            why_not.append(NotKept(reason, state.stage, state.identity, None, count, state.maps))
    why_not += _refused(unsupported, stages)
    return Offer(offered, why_not)


def _refusal(state: ShuffleState, kept: KeptShuffle | None, size_of: SizeOf | None, script: str | None) -> str | None:
    """Why none of a shuffle's whole copies is offered, or None."""
    if kept is None:
        return None
    if script is not None and state.script is not None and state.script != script:
        return "the script changed since they were kept (it is part of each shuffle's identity)"
    if state.bounds is not None and size_of is not None and size_of(bounds_file(state.identity)) is None:
        return "the range bounds they were partitioned by are missing from the keep folder"
    return None


def _shortfall(state: ShuffleState, offered: int) -> str | None:
    """Why fewer map outputs are offered than the shuffle has map tasks (None: all are)."""
    if state.maps and offered >= state.maps:
        return None
    journaled = len(state.kept)
    parts = []
    if journaled > offered:
        parts.append(f"{_count(journaled - offered, 'kept map output')} missing or changed in the keep folder")
    unfinished = max(state.maps - journaled, 0)
    if unfinished:
        parts.append(
            f"{_count(unfinished, 'map task')} not finished, or not yet copied durably, when the attempt ended"
        )
    return "; ".join(parts) or None


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'s' if number != 1 else ''}"


def _refused(unsupported: Iterable[Unsupported], stages: set[str]) -> list[NotKept]:
    """The refusals of the latest attempt that made any, once each, for the stages that run."""
    found = [entry for entry in unsupported if entry.stage is None or entry.stage in stages]
    latest = max((entry.attempt for entry in found), default=None)
    seen, result = set(), []
    for entry in found:
        key = (entry.stage, entry.spark_shuffle, entry.reason)
        if entry.attempt == latest and key not in seen:
            seen.add(key)
            result.append(NotKept(f"not kept: {entry.reason}", entry.stage, None, entry.spark_shuffle))
    return result


def bounds_file(identity: str) -> str:
    """Where a range partitioning's bounds are kept, relative to the keep folder (KeptBounds.java)."""
    return f"{identity}/bounds"


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


# -- views -------------------------------------------------------------------------------------


def progress(
    shuffles: dict[str, ShuffleState], stage: str, offered: Iterable[KeptShuffle] | None = None
) -> tuple[int, int]:
    """(map outputs kept, map tasks) over the shuffles a pipeline stage ran: as the journal says,
    or, given the plan's ``offered`` shuffles, those it offers."""
    counts = None if offered is None else {entry.shuffle: len(entry.maps) for entry in offered}
    kept = total = 0
    for state in shuffles.values():
        if state.stage == stage and state.maps:
            total += state.maps
            kept += min(state.kept_count if counts is None else counts.get(state.identity, 0), state.maps)
    return kept, total


def describe(state: ShuffleState) -> str:
    """``12/24 map outputs kept`` (and what the last attempt reused), for the views."""
    text = f"{state.kept_count}/{state.maps or '?'} map outputs kept"
    last = max(state.reused) if state.reused else None
    if last is not None and state.reused[last]:
        text += f", {state.reused[last]} reused by attempt {last}"
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


def cells(state: ShuffleState) -> tuple[int, list[tuple[int, str, int | None]]] | None:
    """The latest attempt that registered the shuffle, and each map output's state in it: kept
    (reused from the attempt that computed it), computed by it, or not finished. None when no
    attempt after the first planned this shuffle again: nothing of it carried over."""
    if len(state.attempts) < 2:
        return None
    latest = max(state.attempts)
    reused = state.reused_by(latest)
    found: list[tuple[int, str, int | None]] = []
    for index in range(state.maps):
        by = state.computed.get(index)
        if by == latest:
            found.append((index, COMPUTED, by))
        elif by is not None and reused > 0:
            reused -= 1
            found.append((index, KEPT, by))
        else:
            found.append((index, UNFINISHED, None))
    return latest, found


def reused_work(shuffles: dict[str, ShuffleState], attempt: int) -> list[tuple[str | None, int, float]]:
    """(stage, map outputs, seconds) for each shuffle ``attempt`` reused kept map outputs of: the
    time the attempts that computed them took, in the share of their outputs it reused."""
    found = []
    for state in shuffles.values():
        count = state.reused_by(attempt)
        earlier = {by for index, by in state.computed.items() if by < attempt and index in state.kept}
        if not count or not earlier:
            continue
        spent = sum(state.seconds_computing(by) for by in earlier)
        share = min(count / max(sum(1 for by in state.computed.values() if by in earlier), 1), 1.0)
        found.append((state.stage, count, round(spent * share, 3)))
    return found
