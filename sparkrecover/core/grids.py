"""Which partitions of a write, and which map outputs of a shuffle, an attempt kept, computed or
left unfinished: the partition grids of ``sparkrecover report``, as plain data.

A write's grid is a view of the run state's progress of that write (core/kept_partitions.py: the
rule that kept the partitions says which were kept); a shuffle's comes from any ``shuffle.committed``
event (map outputs written and kept under the run, docs/shuffles.md), grouped by its ``shuffle``
identity and numbered by each entry's ``map``, with the map count of its ``shuffle.registered``: a
map output an earlier attempt committed and the shuffle's latest attempt did not compute again was
kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from sparkrecover.core import humanize, kept_partitions
from sparkrecover.core.kept_partitions import COMPUTED, KEPT, UNFINISHED, WriteProgress
from sparkrecover.core.runstate import RunState
from sparkrecover.journal import events as ev


@dataclass(frozen=True)
class Cell:
    index: int
    state: str  # kept, computed or not finished
    attempt: int | None  # the attempt that computed it


@dataclass
class Grid:
    kind: str  # "write" or "shuffle"
    name: str  # the stage, or the shuffle's identity
    stage: str | None
    attempt: int  # the latest attempt that ran it
    cells: list[Cell]
    reason: str | None = None  # why nothing could be kept, when the journal says
    cost: str | None = None  # a shuffle's: the bytes kept and what keeping cost the executors

    def count(self, state: str) -> int:
        return sum(1 for cell in self.cells if cell.state == state)

    @property
    def total(self) -> int:
        return len(self.cells)

    @property
    def kept_from(self) -> list[int]:
        return sorted({cell.attempt for cell in self.cells if cell.state == KEPT and cell.attempt is not None})


@dataclass
class _Shuffle:
    name: str
    stage: str | None
    maps: int = 0
    attempt: int = 0
    done: dict[int, int] = field(default_factory=dict)  # map index -> the attempt that wrote it last
    attempts: set[int] = field(default_factory=set)
    bytes: int = 0  # data and index bytes of every map output kept
    keep_us: int = 0  # on the map tasks' threads
    copy_us: int = 0  # background copies to the keep folder


def shuffle_name(identity: Any) -> str:
    """A shuffle's identity as one line: it may be any JSON value the driver chose."""
    if isinstance(identity, str):
        return identity
    return orjson.dumps(identity, option=orjson.OPT_SORT_KEYS).decode()


class GridFold:
    """Fed every record in journal order; ``grids(state)`` then holds the writes that kept
    partitions or stopped with some committed (from the run state folded from the same records),
    and every shuffle that a later attempt ran again."""

    def __init__(self) -> None:
        self.shuffles: dict[str, _Shuffle] = {}
        self.stage_attempts: dict[str, int] = {}  # stage -> the latest attempt that started it

    def apply(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        if kind == ev.STAGE_STARTED:
            self.stage_attempts[record["stage"]] = record["attempt"]
        elif kind == ev.SHUFFLE_COMMITTED:
            self._shuffle_committed(record)
        elif kind == ev.SHUFFLE_REGISTERED:
            shuffle = self._shuffle(record)
            shuffle.maps = max(shuffle.maps, int(record["maps"]))

    def _shuffle(self, record: dict[str, Any]) -> _Shuffle:
        """The shuffle an event names; an event names the attempt that ran it."""
        name = shuffle_name(record["shuffle"])
        shuffle = self.shuffles.setdefault(name, _Shuffle(name, record.get("stage")))
        shuffle.attempt = max(shuffle.attempt, record["attempt"])
        shuffle.attempts.add(record["attempt"])
        return shuffle

    def _shuffle_committed(self, record: dict[str, Any]) -> None:
        shuffle = self._shuffle(record)
        for entry in record["maps"]:
            index = entry.get("map") if isinstance(entry, dict) else None
            if isinstance(index, int):
                shuffle.maps = max(shuffle.maps, index + 1)
                shuffle.done[index] = record["attempt"]
                shuffle.bytes += _count(entry.get("data_bytes")) + _count(entry.get("index_bytes"))
                shuffle.keep_us += _count(entry.get("keep_us"))
                shuffle.copy_us += _count(entry.get("copy_us"))

    def grids(self, state: RunState) -> list[Grid]:
        found = [
            _write_grid(stage.name, stage.write_progress)
            for stage in state.stages.values()
            if stage.write_progress is not None and kept_partitions.in_grid(stage.write_progress)
        ]
        for shuffle in self.shuffles.values():
            # A later attempt that ran the shuffle's stage and computed none of its maps kept them all.
            shuffle.attempt = max(shuffle.attempt, self.stage_attempts.get(shuffle.stage or "", 0))
            if shuffle.attempt > min(shuffle.attempts):
                found.append(_shuffle_grid(shuffle))
        return found


def _write_grid(stage: str, progress: WriteProgress) -> Grid:
    cells = [Cell(index, state, attempt) for index, state, attempt in kept_partitions.cells(progress)]
    reason = None if progress.reusable else progress.started.get("reason")
    return Grid("write", stage, stage, progress.attempt, cells, reason)


def _shuffle_grid(shuffle: _Shuffle) -> Grid:
    cells = []
    for index in range(shuffle.maps):
        by = shuffle.done.get(index)
        if by is None:
            cells.append(Cell(index, UNFINISHED, None))
        else:
            cells.append(Cell(index, KEPT if by < shuffle.attempt else COMPUTED, by))
    cost = f"{humanize.size(shuffle.bytes)} kept; {shuffle.keep_us / 1000:.0f} ms on map tasks' threads"
    if shuffle.copy_us:
        cost += f", {shuffle.copy_us / 1e6:.1f} s of background copying"
    return Grid("shuffle", shuffle.name, shuffle.stage, shuffle.attempt, cells, cost=cost)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def fold_grids(records: Iterable[dict[str, Any]]) -> list[Grid]:
    """The grids of a journal's records (report folds them once, beside its run state)."""
    fold, state = GridFold(), RunState("")
    for record in records:
        fold.apply(record)
        state.apply(record)
    return fold.grids(state)
