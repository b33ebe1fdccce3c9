"""Kept write partitions (docs/design.md §4a): a partition computed and committed by attempt N is
kept by attempt N+1, when partition i of both writes holds the same rows and the committer's
evidence still holds its files. Every rule of it is here, once:

- which partitions carry over from one attempt's write to the next (``same_partitions``, asked by
  the fold for the journal and by the driver for the write it is about to run);
- what one stage's write has committed, over its attempts (``WriteProgress``, fed by the run
  state's fold: ``started``, ``task_committed``, ``stage_committed``);
- which partitions a resume keeps: those the journal and the evidence agree on (``agreed``, asked
  by the planner with the committer's evidence and by the driver with the folders it set aside),
  handed to the driver as ``KeptTasks``;
- the views: progress by attempt (``inspect``), what a commit kept (``KeptWrite``), and each
  partition's state in ``report``'s grid (``cells``).

Pure: no storage, no Spark (the evidence is handed in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sparkrecover.rundir.plans import KeptTasks

# A partition's state in report's grid (core/views/grids.py draws shuffles' map outputs with the same words).
KEPT, COMPUTED, UNFINISHED = "kept", "computed", "not finished"


class Computed(NamedTuple):
    """Who computed a partition: the attempt whose task committed it with its rows."""

    attempt: int
    rows: int | None  # as the task reported them, None if not counted


def same_partitions(then_shape: Any, then_count: Any, now_shape: Any, now_count: Any, *, now_reusable: bool) -> bool:
    """Whether partition i of a write now holds the rows partition i of an earlier write held:
    the same shape digest (partition count, input slices, partition specs, the script's code) and
    the same count, and the write now is one whose partitions may be kept at all (Spark does not
    call it INDETERMINATE, it reads no clock, ...)."""
    return bool(now_reusable) and then_shape == now_shape and then_count == now_count


def agreed(journal: Iterable[int], evidence: Iterable[int]) -> list[int]:
    """The partitions to keep: committed according to the journal and to the committer's evidence
    (or, on the driver, the task folders it set aside); either alone is not enough."""
    return sorted(set(journal) & set(evidence))


@dataclass
class WriteProgress:
    """One stage's write over its attempts: the latest ``write.started`` and every partition
    computed since the writes stopped having the same partitions."""

    started: dict[str, Any]  # the latest write.started
    computed: dict[int, Computed] = field(default_factory=dict)
    # This write's own job commit made it whole (its stage committed in the same attempt).
    committed: bool = False
    # The stage committed after this write started (in this attempt or another): nothing unfinished is left.
    ended: bool = False
    ever_kept: bool = False  # some attempt's write of this stage kept partitions

    @property
    def attempt(self) -> int:
        return int(self.started["attempt"])

    @property
    def total(self) -> int:
        return int(self.started.get("partitions") or 0)

    @property
    def kept(self) -> list[int]:
        """The partitions this attempt's write kept (not computed: their empty tasks commit again)."""
        return [p for p in self.started.get("kept") or [] if isinstance(p, int)]

    @property
    def reusable(self) -> bool:
        return bool(self.started.get("reusable"))

    @property
    def unfinished(self) -> dict[int, Computed]:
        """The partitions a resume may keep (nothing once the stage committed)."""
        return {} if self.ended else self.computed

    def by_attempt(self, partitions: Iterable[int] | None = None) -> dict[str, int]:
        """How many of ``partitions`` (default: every computed one) each attempt computed."""
        counts: dict[str, int] = {}
        for partition in self.computed if partitions is None else partitions:
            key = str(self.computed[partition].attempt)
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: int(item[0])))


# -- the fold ----------------------------------------------------------------------------------


def started(previous: WriteProgress | None, record: dict[str, Any]) -> WriteProgress:
    """A ``write.started``: what the previous unfinished write computed carries over when
    partition i holds the same rows in both."""
    progress = WriteProgress(record, ever_kept=bool(previous and previous.ever_kept) or bool(record.get("kept")))
    if (
        previous is not None
        and not previous.ended
        and same_partitions(
            previous.started.get("shape"),
            previous.started.get("partitions"),
            record.get("shape"),
            record.get("partitions"),
            now_reusable=bool(record.get("reusable")),
        )
    ):
        progress.computed = previous.computed
    return progress


def task_committed(progress: WriteProgress | None, record: dict[str, Any]) -> None:
    """A ``task.committed`` of the write of its own attempt. A kept partition's task commits again in
    the resumed write, empty: it was not computed, and its rows are in the task folder of the
    attempt that did compute it."""
    partition = record.get("partition")
    if progress is None or progress.attempt != record["attempt"] or not isinstance(partition, int):
        return
    if partition not in progress.kept:
        rows = record.get("records")
        progress.computed[partition] = Computed(record["attempt"], rows if isinstance(rows, int) else None)


def stage_committed(progress: WriteProgress | None, attempt: int) -> dict[str, Any] | None:
    """The stage committed in ``attempt``: the write is whole. Returns what its commit kept of
    earlier attempts (``kept_write``), or None when it kept nothing."""
    if progress is None:
        return None
    progress.ended = True
    if progress.attempt != attempt:
        return None
    progress.committed = True
    if not progress.kept:
        return None
    kept = [p for p in progress.kept if p in progress.computed]
    total = progress.total
    by_attempt = progress.by_attempt(kept)
    by_attempt[str(attempt)] = by_attempt.get(str(attempt), 0) + total - len(kept)
    rows = [progress.computed[p].rows for p in kept]
    return {
        "kept": len(kept),
        "computed": total - len(kept),
        "total": total,
        "by_attempt": dict(sorted(by_attempt.items(), key=lambda item: int(item[0]))),
        # Which partitions each earlier attempt computed (the rest the committing attempt did).
        "kept_from": {
            key: sorted(p for p in kept if str(progress.computed[p].attempt) == key)
            for key in sorted(by_attempt, key=int)
            if key != str(attempt)
        },
        "kept_rows": sum(r for r in rows if r is not None) if all(r is not None for r in rows) else None,
    }


# -- what a resume keeps -----------------------------------------------------------------------


def to_keep(progress: WriteProgress, evidence: Iterable[int]) -> KeptTasks | None:
    """What the driver of the next attempt is told to keep, or None when no partition is."""
    kept = agreed(progress.unfinished, evidence)
    if not kept:
        return None
    return KeptTasks(
        kept=kept,
        partitions=progress.total,
        shape=progress.started.get("shape"),
        # The partition specs adaptive execution chose for the write: the driver keeps nothing if
        # the resumed attempt's differ, and says so.
        specs=progress.started.get("specs"),
        empty=[p for p in kept if progress.computed[p].rows == 0],
    )


# -- report's grid -----------------------------------------------------------------------------


def in_grid(progress: WriteProgress) -> bool:
    """A write has a grid when some attempt kept partitions, or it stopped with some committed."""
    own = any(c.attempt == progress.attempt for c in progress.computed.values())
    return progress.ever_kept or (own and not progress.committed)


def cells(progress: WriteProgress) -> list[tuple[int, str, int | None]]:
    """(partition, state, the attempt that computed it) for each partition of the latest write."""
    found: list[tuple[int, str, int | None]] = []
    kept = set(progress.kept)
    for index in range(progress.total):
        computed = progress.computed.get(index)
        if index in kept:
            found.append((index, KEPT, computed.attempt if computed else None))
        elif (computed is not None and computed.attempt == progress.attempt) or progress.committed:
            # A committed write holds every partition; one without a task record was computed too.
            found.append((index, COMPUTED, progress.attempt))
        else:
            found.append((index, UNFINISHED, None))
    return found
