"""What resume does with each stage (docs/design.md §4 rules 1-4, §8).

Decisions:
- ``skip``: committed and its output still matches the manifest;
- ``run``: started or failed but never committed (§4 rule 2: not finished);
- ``rerun``: committed, but runs again (asked for, output lost and needed, upstream reruns);
- ``lost``: committed, output gone or changed, and nothing that runs needs it (reported, §4 rule 4);
- ``continue``: a write that started and did not commit, some of whose partitions committed their
  tasks (journal and committer evidence agree): those are kept, the rest run (docs/design.md §4a).

Stages the journal never saw are not in the plan: a driver runs every stage the plan does not
name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from sparkrecover.core.fold import kept_partitions, kept_shuffles
from sparkrecover.core.fold.kept_shuffles import NotKept
from sparkrecover.core.fold.runstate import COMMITTED, FAILED, RunState, StageState
from sparkrecover.core.verdicts import staleness
from sparkrecover.core.verdicts.evidence import Evidence
from sparkrecover.kinds import FOREACH, Verdict
from sparkrecover.rundir.plans import (
    ActionEntry,
    Committed,
    KeptShuffle,
    PartitionCount,
    Plan,
    PlanEntry,
    SchemaEntry,
)

SKIP, RUN, RERUN, LOST, CONTINUE = Verdict.SKIP, Verdict.RUN, Verdict.RERUN, Verdict.LOST, Verdict.CONTINUE


def stage_named(given: str, names: list[str], run_id: str) -> str:
    """The stage ``--rerun`` means: its whole name, the name's first word (an implicit write's
    ``file:line#n``, what tables show first), or any prefix of one name only."""
    from sparkrecover.errors import UsageError

    if given in names:
        return given
    matches = [name for name in names if name.split(" ", 1)[0] == given] or [
        name for name in names if name.startswith(given)
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(
            f"--rerun {given!r} names {len(matches)} stages of run {run_id}: {'; '.join(matches)}; "
            "give more of the name"
        )
    valid = "; ".join(names) if names else "it recorded none"
    raise UsageError(f"--rerun {given!r} names no stage of run {run_id}; its stages: {valid}")


def make_plan(
    state: RunState,
    evidence: Evidence,
    *,
    rerun: Iterable[str] = (),
    from_scratch: bool = False,
    verified: str = "output verified",
) -> list[PlanEntry]:
    """``verified`` says how a skipped stage's output was checked, in its reason."""
    requested = {stage_named(given, list(state.stages), state.run_id) for given in rerun}
    decisions: dict[str, PlanEntry] = {}
    for name, stage in state.stages.items():
        if not stage.last_event and stage.records_lost is None:
            # Only Spark's telemetry names it: jobs it ran before it started (a write's probe),
            # then the driver died. Nothing of it was written: it runs as a stage never reached.
            continue
        decisions[name] = _first_decision(stage, evidence, name in requested, from_scratch, verified)
        if decisions[name].decision == RUN and not from_scratch:
            _continue_write(stage, decisions[name], evidence)
    if not from_scratch:
        _superseded(state, decisions)
    _propagate(state, decisions)
    return [decisions[name] for name in state.stages if name in decisions]


def _first_decision(
    stage: StageState, evidence: Evidence, requested: bool, from_scratch: bool, verified: str = "output verified"
) -> PlanEntry:
    def decide(decision: Verdict, reason: str) -> PlanEntry:
        return PlanEntry(
            stage.name,
            decision,
            reason + _caveat(stage, decision),
            kind=stage.kind,
            upstream=list(stage.upstream),
            committed=_read_back(stage),
            restore=_restore(stage),
            fingerprint=(stage.started or {}).get("fingerprint") if stage.status == COMMITTED else None,
        )

    if stage.status != COMMITTED:
        if from_scratch and stage.committed:
            return decide(RERUN, "--from-scratch")
        if stage.status == FAILED:
            error = (stage.failed or {}).get("error") or "unknown error"
            return decide(RUN, f"failed in attempt {stage.attempt}: {error.splitlines()[0][:200]}")
        if stage.records_lost is not None:
            return decide(
                RUN, f"its journal records of attempt {stage.attempt} were lost while the journal's storage was failing"
            )
        return decide(RUN, f"started in attempt {stage.attempt} but not committed")
    if from_scratch:
        return decide(RERUN, "--from-scratch")
    if requested:
        return decide(RERUN, "--rerun")
    problems = evidence.verify(stage)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        return decide(LOST, f"output lost: {problems[0]}{more}")
    # §4 rule 5, the CLI's half: the input files recorded at start are checked before launch (the
    # driver checks code, plan and version when it reaches the stage).
    changed = staleness.changed_inputs((stage.started or {}).get("fingerprint"), evidence.stat)
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return decide(RERUN, f"input changed: {changed[0]}{more}")
    if (stage.started or {}).get("verifiable") is False:
        return decide(SKIP, f"committed in attempt {stage.committed_attempt}")
    return decide(SKIP, f"committed in attempt {stage.committed_attempt}, {verified}")


def _continue_write(stage: StageState, decision: PlanEntry, evidence: Evidence) -> None:
    """Turn ``run`` into ``continue`` when some partitions of the unfinished write are kept."""
    progress = stage.write_progress
    whole = (stage.started or {}).get("whole")
    if progress is None and isinstance(whole, str):
        decision.reason += f"; no partition is kept: {whole}"  # task-level resume did not apply
    if progress is None or not progress.unfinished:
        return
    if not progress.reusable:
        decision.reason += f"; no partition is kept: {progress.started.get('reason') or 'its partitions may differ'}"
        return
    if stage.kind == FOREACH:
        # A side effect leaves nothing of ours to check: the journal alone says which partitions
        # finished, and a record it lost only makes one run again
        # (docs/decisions/0044-side-effects-kept-per-partition.md).
        found, problem = set(progress.unfinished), None
    else:
        found, problem = evidence.committed_partitions(stage)
    tasks = kept_partitions.to_keep(progress, found)
    if tasks is None:
        decision.reason += f"; no partition is kept: {problem or 'the partitions it committed left no files'}"
        return
    attempts = sorted({progress.computed[p].attempt for p in tasks.kept})
    decision.decision = CONTINUE
    done = "finished" if stage.kind == FOREACH else "committed"
    decision.reason = (
        f"{len(tasks.kept)}/{tasks.partitions} partitions kept ({done} in attempt {', '.join(map(str, attempts))})"
    )
    decision.partitions = PartitionCount(kept=len(tasks.kept), total=tasks.partitions)
    # The driver keeps nothing if the stage changed since (§4 rule 5): compared like a skip's.
    decision.fingerprint = (stage.started or {}).get("fingerprint")
    decision.tasks = tasks


def _caveat(stage: StageState, decision: Verdict) -> str:
    """What the plan cannot promise for an implicit write with nothing to check (a JDBC sink, a
    save() without a path): said in the plan rather than guessed."""
    started = stage.started or {}
    if stage.kind != "write" or started.get("verifiable") is not False:
        return ""
    note = f"; {started.get('target') or 'its output'} cannot be verified"
    if started.get("mode") == "append" and decision == RUN:
        note += ": an interrupted append to it may have left partial rows, and it is appended again"
    elif started.get("mode") == "append" and decision == RERUN:
        note += ": it is appended again, and the rows it appended before stay"
    return note


def _superseded(state: RunState, decisions: dict[str, PlanEntry]) -> None:
    """A committed output that a later committed stage of the run changed (a table inserted into,
    truncated or dropped after it was written) no longer matches its own manifest: the later
    stage's record describes it. So it is skipped, not lost, while that stage's output verifies
    (the later stage may itself have been changed by one after it: from the last one back)."""
    names = [name for name in state.stages if name in decisions]
    for index in range(len(names) - 1, -1, -1):
        decision, stage = decisions[names[index]], state.stages[names[index]]
        paths = _output_paths(stage)
        if decision.decision != LOST or not paths:
            continue
        later = next((state.stages[n] for n in names[index + 1 :] if _output_paths(state.stages[n]) & paths), None)
        if (
            later is None
            or later.status != COMMITTED
            or decisions[later.name].decision != SKIP
            or (later.committed_attempt or 0) < (stage.committed_attempt or 0)
        ):
            continue
        drop = (later.started or {}).get("mode") == "drop"
        decision.decision = SKIP
        decision.reason = (
            f"committed in attempt {stage.committed_attempt}; {later.name} "
            f"{'dropped its table' if drop else 'changed its output'} since"
        )
        if decision.committed is not None:
            decision.committed.superseded_by = later.name


def _output_paths(stage: StageState) -> set[str]:
    committed = stage.committed or {}
    return {out["path"] for out in committed.get("manifest") or [] if out.get("path")} or set(stage.outputs)


def _propagate(state: RunState, decisions: dict[str, PlanEntry]) -> None:
    """§4 rule 4 to a fixpoint: a lost output that a running stage needs is rebuilt, and everything
    downstream of a stage that runs again runs again too."""
    downstream: dict[str, list[str]] = {name: [] for name in decisions}
    for name, decision in decisions.items():
        for parent in decision.upstream:
            if parent in downstream:
                downstream[parent].append(name)
    changed = True
    while changed:
        changed = False
        for name, decision in decisions.items():
            if decision.decision not in (RUN, RERUN, CONTINUE):
                continue
            for parent in decision.upstream:
                before = decisions.get(parent)
                # A superseded output no longer holds what this stage read from it: rebuilt too.
                if before is not None and (before.decision == LOST or before.superseded):
                    before.decision = RERUN
                    before.reason = f"{before.reason}; needed by {name}"
                    changed = True
            for child in downstream[name]:
                after = decisions[child]
                if after.decision in (SKIP, LOST):
                    after.decision = RERUN
                    after.reason = f"upstream {name} runs again" + _caveat(state.stages[child], RERUN)
                    changed = True


def _read_back(stage: StageState) -> Committed | None:
    committed = stage.committed
    if not committed:
        return None
    back = Committed(
        attempt=committed["attempt"],
        format=committed.get("format"),
        schema=committed.get("schema"),
        paths=[out.get("spark_path") or out["path"] for out in committed.get("manifest") or []],
        table=committed.get("table") or None,  # how a table write registers its table again
    )
    if stage.kind == "write":
        # An implicit append that reruns removes exactly the files it added (zero-code mode).
        back.manifest = committed.get("manifest")
        back.manifest_ref = committed.get("manifest_ref")
        back.manifest_sha256 = committed.get("manifest_sha256")
    return back


def _restore(stage: StageState) -> list[dict[str, Any]]:
    started = stage.started or {}
    return list(started.get("before") or [])


def plan_shuffles(
    state: RunState,
    decisions: list[PlanEntry],
    size_of: kept_shuffles.SizeOf | None,
    *,
    from_scratch: bool = False,
    script: str | None = None,
) -> list[KeptShuffle]:
    """The kept shuffle map outputs the next attempt may reuse (``shuffle_offer``'s)."""
    return shuffle_offer(state, decisions, size_of, from_scratch=from_scratch, script=script).shuffles


def shuffle_offer(
    state: RunState,
    decisions: list[PlanEntry],
    size_of: kept_shuffles.SizeOf | None,
    *,
    from_scratch: bool = False,
    script: str | None = None,
) -> kept_shuffles.Offer:
    """The kept shuffle map outputs the next attempt may reuse (``size_of`` reads the keep folder;
    None when there is none; ``script``: the digest of the script it runs), and on each stage that
    runs how many of its map outputs are offered and, per shuffle, why the others are not. Offered
    is not reused: the next application reuses them only for a shuffle it plans with the same
    identity (``inspect``, ``replay`` and ``report`` count what it did reuse)."""
    if from_scratch:
        return kept_shuffles.Offer([])
    running = {d.stage for d in decisions if d.decision in (RUN, RERUN, CONTINUE)}
    # A stage the plan leaves out (only Spark's telemetry names it: the driver died in its write's
    # probe, where its map stages run) runs as one never reached: its kept map outputs are offered.
    planned = {d.stage for d in decisions}
    running |= {s.stage for s in state.shuffles.values() if s.stage is not None and s.stage not in planned}
    offer = kept_shuffles.offer(state.shuffles, size_of, running, script, state.shuffles_unsupported)
    for decision in decisions:
        if decision.stage not in running:
            continue
        kept, total = kept_shuffles.progress(state.shuffles, decision.stage, offer.shuffles)
        if not total:
            continue
        decision.shuffle_maps = PartitionCount(kept=kept, total=total)
        decision.reason += _why_not_kept(kept, total, offer.not_kept_in(decision.stage))
    return offer


def _why_not_kept(kept: int, total: int, not_kept: list[kept_shuffles.NotKept]) -> str:
    """What a stage's reason adds about its shuffles: how many map outputs are kept and, per
    shuffle, why the others are not."""
    reasons = {entry.reason for entry in not_kept}
    if not kept and len(reasons) == 1 and all(entry.shuffle for entry in not_kept):
        return f", no shuffle map output reusable: {reasons.pop()}"
    text = f", {kept}/{total} shuffle map outputs kept"
    return text + (f" ({'; '.join(entry.describe() for entry in not_kept)})" if not_kept else "")


class NextAttempt(Protocol):
    """The plan a resume made for the next attempt, whole (``planning/next_attempt.py: ResumePlan``),
    as ``plan_of`` and ``dry_run_document`` render it: a new part of the plan is one more field of
    the value, not one more parameter of each."""

    @property
    def run_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def decisions(self) -> list[PlanEntry]: ...

    @property
    def schemas(self) -> list[SchemaEntry] | None: ...

    @property
    def shuffles(self) -> list[KeptShuffle] | None: ...

    @property
    def actions(self) -> list[ActionEntry] | None: ...

    @property
    def shuffles_not_kept(self) -> list[NotKept] | None: ...


@dataclass
class StageDecisions:
    """A plan of stage decisions alone: what ``replay`` shows a dry run would have printed at a past
    moment (no schemas, shuffles or actions: it works out none), and tests."""

    run_id: str
    attempt: int
    decisions: list[PlanEntry]
    schemas: list[SchemaEntry] | None = None
    shuffles: list[KeptShuffle] | None = None
    actions: list[ActionEntry] | None = None
    shuffles_not_kept: list[NotKept] | None = None


def plan_of(planned: NextAttempt) -> Plan:
    """The plan handed to the next attempt (plans/<attempt>.json)."""
    return Plan(
        run=planned.run_id,
        attempt=planned.attempt,
        stages=planned.decisions,
        schemas=list(planned.schemas or []),
        shuffles=list(planned.shuffles or []),
        actions=list(planned.actions or []),
    )


def dry_run_document(planned: NextAttempt) -> dict[str, Any]:
    """The exact shape of ``resume --dry-run --json`` (docs/design.md §8)."""
    document: dict[str, Any] = {
        "run": planned.run_id,
        "attempt": planned.attempt,
        "stages": [d.summary() for d in planned.decisions],
    }
    if planned.schemas is not None:
        document["schemas"] = [entry.summary() for entry in planned.schemas]
    if planned.shuffles is not None:
        document["shuffles"] = [entry.summary() for entry in planned.shuffles]
    if planned.shuffles_not_kept is not None:
        document["shuffles_not_kept"] = [entry.summary() for entry in planned.shuffles_not_kept]
    if planned.actions is not None:
        document["actions"] = [entry.summary() for entry in planned.actions]
    return document
