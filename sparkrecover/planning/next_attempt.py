"""The plan of a run's next attempt, from its folded journal and what survives on storage.

``resume`` (the command line) and a driver restarted by a launcher (``driver/bootstrap.py``) both
plan here, with the same rules: the run is read once (``read_run``; a damaged journal only for a
``--from-scratch`` resume), then ``plan_resume`` asks the core's planner, the schema reuse rule and
the kept shuffle rule, each given the storage evidence (``evidence.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core.fold import kept_shuffles
from sparkrecover.core.fold.kept_shuffles import NotKept
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import action_reuse, planner, schema_reuse, staleness
from sparkrecover.errors import JournalDamagedError
from sparkrecover.journal import events as ev
from sparkrecover.journal import reader
from sparkrecover.journal.segments import latest_attempt, list_segments
from sparkrecover.planning import reading
from sparkrecover.planning.storage_evidence import StorageEvidence
from sparkrecover.rundir import keep, results, storage
from sparkrecover.rundir.plans import ActionEntry, KeptShuffle, Plan, PlanEntry, SchemaEntry
from sparkrecover.rundir.runs import Run

Notify = Callable[[str], None]
DAMAGED_DIR = "journal.damaged"


@dataclass
class ResumePlan:
    run: Run
    state: RunState
    attempt: int
    decisions: list[PlanEntry]
    # Inferred schemas the next attempt may reuse (core/verdicts/schema_reuse.py), beside the stage decisions.
    schemas: list[SchemaEntry] = field(default_factory=list)
    # Kept shuffle map outputs the next attempt may reuse (planner.plan_shuffles).
    shuffles: list[KeptShuffle] = field(default_factory=list)
    # Recorded actions, each replayed or run again (core/verdicts/action_reuse.py).
    actions: list[ActionEntry] = field(default_factory=list)
    # Per shuffle, why map outputs are not offered (refused, unfinished, missing, another script).
    shuffles_not_kept: list[NotKept] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run.id

    def document(self) -> Plan:
        return planner.plan_of(self)

    def dry_run(self) -> dict[str, Any]:
        return planner.dry_run_document(self)


def finished(state: RunState, rerun: tuple[str, ...] = (), from_scratch: bool = False) -> bool:
    """Whether nothing is left to run: the run succeeded and no stage is asked to run again. A
    finished run is never launched again, by a command or by a restarted driver."""
    return state.succeeded and not (rerun or from_scratch)


def last_attempt_succeeded(run: Run) -> bool:
    """Whether the run's last attempt succeeded, from that attempt's records alone (no lease
    taken, nothing written): a restart of a finished run stops here, and a launcher asked to
    recompute a finished run starts another (``launch/taskruns.py``)."""
    if not run.has_journal():
        return False
    last = latest_attempt(run.dir)
    if not last:
        return False
    return RunState.from_events(run.id, reader.iter_journal(run.dir, attempt=last)).succeeded


def read_run(run: Run, *, from_scratch: bool = False, warn: Notify | None = None, set_aside: bool = False) -> RunState:
    """The run folded for planning. A damaged journal can only be planned ``from_scratch``: its
    damaged segments are left out (moved to ``journal.damaged/`` when ``set_aside``, i.e. when
    the attempt is launched, not on a dry run) and every stage runs."""
    try:
        return reading.load_state(run, warn)
    except JournalDamagedError:
        if not from_scratch:
            raise
    return RunState.from_events(run.id, _without_damage(run.dir, warn or (lambda message: None), set_aside))


def plan_resume(
    state: RunState,
    run: Run,
    attempt: int,
    *,
    verify_level: str = "size",
    rerun: tuple[str, ...] = (),
    from_scratch: bool = False,
    replay: bool = True,
    warn: Notify | None = None,
    progress: Callable[[int], None] | None = None,
) -> ResumePlan:
    """The plan of ``attempt``, the next attempt of the run ``state`` holds."""
    run_id = run.id
    evidence = StorageEvidence(run.dir, verify_level, progress)
    verified = "output verified"
    if verify_level == "checksum" and not state.run.get("checksums"):
        # Without digests the checksum level checks what footer does: say so, not "verified".
        verified = "output verified by size and footer (no checksums were recorded)"
        if warn:
            warn(
                f"--verify checksum: run {run_id} was recorded without checksums (submit --checksums records "
                "them); outputs were checked by file sizes, _SUCCESS and Parquet/ORC footers instead"
            )
    decisions = planner.make_plan(state, evidence, rerun=rerun, from_scratch=from_scratch, verified=verified)
    reusable = schema_reuse.reusable(state, evidence.stat, from_scratch=from_scratch)
    app = state.run.get("app")
    script = staleness.script_digest(app, storage.read_bytes) if isinstance(app, str) else None
    offer = planner.shuffle_offer(state, decisions, keep.size_reader(run.dir), from_scratch=from_scratch, script=script)
    actions = action_reuse.replayable(
        state, evidence.stat, results.size_reader(run.dir), from_scratch=from_scratch, replay=replay
    )
    return ResumePlan(run, state, attempt, decisions, reusable, offer.shuffles, actions, offer.not_kept)


def sweep_unjournaled(state: RunState, run_dir: str, notify: Notify) -> None:
    """Remove the kept map output folders no journal record names (an executor lost mid-copy, a
    driver killed before it journaled them): never read, they would stay until the run succeeds.
    Before an attempt's launch, by ``resume`` and by a driver a launcher restarted alike, so the
    keep folder holds what the journal names."""
    swept = keep.sweep(run_dir, kept_shuffles.named_folders(state.shuffles))
    if swept:
        notify(f"removed {len(swept)} kept shuffle map output folder(s) that no journal record names")


def _without_damage(run_dir: str, notify: Notify, set_aside: bool) -> list[dict[str, Any]]:
    """The run's records from its sound segments, the damaged ones set aside
    (docs/decisions/0016-damaged-journal.md).

    The fold cannot know what the damaged segments held (stages committed, outputs written), so
    this is for ``--from-scratch`` only, where every stage runs whatever the journal said. The
    run's ``run.started`` (how to relaunch it) is salvaged from a damaged segment if it was there.
    """
    damaged = reader.damaged_segments(run_dir)
    sound = [s for s in list_segments(run_dir) if s not in damaged]
    salvaged = [
        record
        for segment in damaged
        if segment.attempt == min(s.attempt for s in [*sound, *damaged])
        for record in reader.salvage_records(segment)
        if record["type"] == ev.RUN_STARTED
    ][:1]
    records = list(reader.iter_segments(sound))
    if salvaged and not any(record["type"] == ev.RUN_STARTED for record in records[:1]):
        records.insert(0, salvaged[0])
    names = ", ".join(segment.name for segment in damaged)
    if set_aside:
        for segment in damaged:
            _move(segment.url, storage.join(run_dir, DAMAGED_DIR, segment.name))
        notify(
            f"the journal was damaged: set {len(damaged)} segment(s) aside in "
            f"{storage.join(run_dir, DAMAGED_DIR)} for inspection ({names}); every stage runs again"
        )
    else:
        notify(f"the journal is damaged ({names}): --from-scratch sets those segments aside and runs every stage again")
    return records


def _move(url: str, to: str) -> None:
    target, number = to, 1
    while storage.exists(target):  # damaged twice: keep both
        number += 1
        target = f"{to}.{number}"
    storage.write_atomic(target, storage.read_bytes(url))
    fs, path = storage.filesystem(url)
    with storage.guard(url, "set a damaged journal segment aside"):
        fs.rm(path)
