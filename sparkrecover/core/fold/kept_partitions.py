"""Kept write partitions (docs/design.md §4a): a partition computed and committed by attempt N is
kept by attempt N+1, when partition i of both writes holds the same rows and the committer's
evidence still holds its files. Every rule of it is here, once:

- which partitions carry over from one attempt's write to the next (``same_partitions``, asked by
  the fold for the journal and by the driver for the write it is about to run);
- what one stage's write has committed, over its attempts (``WriteProgress``, fed by the run
  state's fold: ``started``, ``task_committed``, ``stage_committed``);
- which committed tasks a resumed write keeps (``adopt``: one committer's evidence, the job-commit
  check, usable tasks, the journal's agreement, one job or one place), asked in the same words by
  `resume --dry-run` (``planning/storage_evidence.py``) and by the driver (``driver/tasks/taskresume.py``), so
  the plan promises what the driver keeps; handed to the driver as ``KeptTasks``;
- the views: progress by attempt (``inspect``), what a commit kept (``KeptWrite``), and each
  partition's state in ``report``'s grid (``cells``).

Pure: no storage, no Spark (the evidence, and how to read it, are handed in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from sparkrecover.kinds import CommitKind
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


def on_write_started(previous: WriteProgress | None, record: dict[str, Any]) -> WriteProgress:
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


class CommittedTask(Protocol):
    """One committed task as its committer's evidence shows it (``rundir/taskfiles.TaskFolder``)."""

    partition: int
    files: list[tuple[str, int]]  # its data files: none when its task wrote no rows
    problem: str | None  # why it cannot be kept (files of another partition or write, unreadable...)
    job: str | None  # a pendingset's S3A job

    @property
    def place(self) -> str:
        """The folder it sits in."""
        ...


Task = TypeVar("Task", bound=CommittedTask)
# Whose committed tasks a resumed write adopts when several committers left some: one write commits
# through one committer, and sparkrecover's set-aside cleans up for that one alone.
ADOPTED_FIRST = (CommitKind.PENDINGSETS, CommitKind.MANIFESTS, CommitKind.FOLDERS)


@dataclass
class Adopted(Generic[Task]):
    """What a resumed write keeps of the committed tasks below its target."""

    kind: CommitKind  # whose tasks: the first kind of ``ADOPTED_FIRST`` that left any
    found: Mapping[int, Sequence[Task]]  # every task of that kind, by partition (what is not kept goes)
    chosen: dict[int, Task]  # the one task kept per partition
    began: bool = False  # the dead job commit had begun: nothing of it is kept


def adopt(
    read: Callable[[CommitKind], Mapping[int, Sequence[Task]]],
    wanted: Iterable[int],
    empty_ok: Iterable[int],
    job_commit_began: Callable[[Mapping[int, Sequence[Task]]], bool],
) -> Adopted[Task]:
    """The one rule of what a resumed write keeps, for the plan and for the driver alike: the
    committed tasks of one committer (``read`` gives each kind's, read in the order of
    ``ADOPTED_FIRST`` until one left some), none when that committer's job commit had begun
    (``job_commit_began``: some of their files are in the target already), else those ``wanted``
    (the journal's committed partitions) that are usable, of one S3A job (pendingsets: a write
    commits under one job's UUID) or one job folder (manifests: the one holding most of them)."""
    found: Mapping[int, Sequence[Task]] = {}
    kind = CommitKind.FOLDERS
    for kind in ADOPTED_FIRST:
        found = read(kind)
        if found:
            break
    wanted = set(wanted)
    if wanted and job_commit_began(found):
        return Adopted(kind, found, {}, began=True)
    return Adopted(kind, found, choose(kind, found, wanted, set(empty_ok)))


def outranked_by(kind: CommitKind, read: Callable[[CommitKind], Mapping[int, Sequence[Any]]]) -> CommitKind | None:
    """The committer, before ``kind`` in ``ADOPTED_FIRST``, that left committed tasks below the
    target (``read``), or None: a resumed write under ``kind`` then keeps nothing, since what the plan
    promised it (and the set-aside kept) is that committer's, and what it would find of its own was
    never agreed with the journal."""
    for other in ADOPTED_FIRST[: ADOPTED_FIRST.index(kind)]:
        if read(other):
            return other
    return None


def choose(
    kind: CommitKind, found: Mapping[int, Sequence[Task]], wanted: Iterable[int], empty_ok: set[int]
) -> dict[int, Task]:
    """The tasks of one committer a resumed write keeps: usable, agreed with the journal, of one job
    (pendingsets) or one job folder (manifests)."""
    usable_ones = usable(found, empty_ok)
    agreed_ones = {p: usable_ones[p] for p in agreed(wanted, usable_ones)}
    if kind == CommitKind.PENDINGSETS:
        return agreed_ones if len({task.job for task in agreed_ones.values()}) <= 1 else {}
    if kind == CommitKind.MANIFESTS:
        places = [task.place for task in agreed_ones.values()]
        if not places:
            return {}
        place = max(sorted(set(places)), key=places.count)
        return {p: task for p, task in agreed_ones.items() if task.place == place}
    return agreed_ones


def usable(found: Mapping[int, Sequence[Task]], empty_ok: set[int]) -> dict[int, Task]:
    """The one task to keep for each partition that has one: no problem, and files (exactly one
    such task), or none at all when the journal says the task wrote no rows (``empty_ok``: Spark
    writes nothing for an empty partition other than 0)."""
    chosen: dict[int, Task] = {}
    for partition, candidates in found.items():
        good = [t for t in candidates if t.problem is None and (t.files or partition in empty_ok)]
        with_files = [t for t in good if t.files]
        if len(with_files) == 1:
            chosen[partition] = with_files[0]
        elif not with_files and good:
            chosen[partition] = good[0]
    return chosen


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
