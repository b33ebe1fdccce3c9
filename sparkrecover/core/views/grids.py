"""Which partitions of a write, and which map outputs of a shuffle, an attempt kept, computed or
left unfinished: the partition grids of ``sparkrecover report``, as plain data.

Both are views of the run state, each drawn by the rule that kept them: a write's by
core/fold/kept_partitions.py, a shuffle's by core/fold/kept_shuffles.py (a map output is kept in an attempt only
when that attempt's ``shuffle.registered`` says it reused kept outputs: a shuffle the resumed
application planned with another identity shows nothing kept).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sparkrecover.core import humanize
from sparkrecover.core.fold import kept_partitions, kept_shuffles
from sparkrecover.core.fold.kept_partitions import COMPUTED, KEPT, UNFINISHED, WriteProgress
from sparkrecover.core.fold.runstate import RunState

__all__ = ["COMPUTED", "KEPT", "UNFINISHED", "Cell", "Grid", "fold_grids", "grids_of"]


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


def grids_of(state: RunState) -> list[Grid]:
    """The writes that kept partitions or stopped with some committed, and every shuffle a later
    attempt planned again."""
    found = [
        _write_grid(stage.name, stage.write_progress)
        for stage in state.stages.values()
        if stage.write_progress is not None and kept_partitions.in_grid(stage.write_progress)
    ]
    for shuffle in state.shuffles.values():
        drawn = kept_shuffles.cells(shuffle)
        if drawn is not None:
            latest, cells = drawn
            grid = Grid("shuffle", shuffle.identity, shuffle.stage, latest, [Cell(i, s, a) for i, s, a in cells])
            grid.cost = _shuffle_cost(shuffle)
            found.append(grid)
    return found


def _write_grid(stage: str, progress: WriteProgress) -> Grid:
    cells = [Cell(index, state, attempt) for index, state, attempt in kept_partitions.cells(progress)]
    reason = None if progress.reusable else progress.started.get("reason")
    return Grid("write", stage, stage, progress.attempt, cells, reason)


def _shuffle_cost(shuffle: kept_shuffles.ShuffleState) -> str:
    """The bytes its kept map outputs hold and what keeping them cost the executors."""
    kept = sum(_count(entry.get("data_bytes")) + _count(entry.get("index_bytes")) for entry in shuffle.kept.values())
    cost = f"{humanize.size(kept)} kept; {shuffle.keep_us / 1000:.0f} ms on map tasks' threads"
    if shuffle.copy_us:
        cost += f", {shuffle.copy_us / 1e6:.1f} s of background copying"
    return cost


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def fold_grids(records: Iterable[dict[str, Any]]) -> list[Grid]:
    """The grids of a journal's records (report reads them from the run state it folds anyway)."""
    return grids_of(RunState.from_events("", records))
