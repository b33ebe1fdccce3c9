"""Time saved by recovery: its one definition (docs/report.md), for the summary ``submit`` and
``resume`` end with and for ``report``'s page alike.

An attempt saved the time earlier attempts spent on work it reused instead of doing again, each
piece measured on the clock of the attempt that did it, and counted only where the journal shows
the reuse happened:

- a stage it skipped (its ``stage.skipped``; not a lost output): the stage's duration at its commit;
- partitions its write kept (the ``kept`` of its ``write.started``): from the earlier attempt's
  ``write.started`` of that stage to the commit of the last of them;
- actions it replayed (its ``action.replayed``): what running each took in the attempt that
  recorded it; a trained model it loaded instead: its training less what loading it took;
- shuffle map outputs it reused (the ``reused`` of its ``shuffle.registered``): the time the
  attempts that computed them took, from registering the shuffle to keeping its last map output,
  in the share it reused.

What a plan offered counts for nothing: a resume that reused nothing saved nothing, and says so.
The figure is never negative; what a resume itself cost (its driver's start, the checks before
launch) is in its own duration, which ``report`` shows beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sparkrecover.core import humanize
from sparkrecover.core.fold import kept_shuffles
from sparkrecover.journal import events as ev
from sparkrecover.kinds import MODEL_ACTIONS


@dataclass(frozen=True)
class Saving:
    attempt: int  # the attempt that reused the work
    stage: str | None  # the pipeline stage it belongs to (None: work outside any stage)
    seconds: float
    how: str  # "skipped", "kept N partitions", "replayed N actions", "loaded N models" or "reused N map outputs"


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def models_of(record: dict[str, Any]) -> int:
    """How many models an ``action.recorded`` or ``action.replayed`` of a training holds: a fit given
    a list of param maps says how many (``models``), any other one."""
    return record["models"] if isinstance(record.get("models"), int) else 1


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class SavingsFold:
    """The stage and write half, fed by the run state's fold in journal order (the shuffle half is
    read from the run state's shuffles: ``of``)."""

    durations: dict[str, float] = field(default_factory=dict)  # stage -> duration at its latest commit
    write_start: dict[tuple[int, str], float] = field(default_factory=dict)
    task_done: dict[tuple[int, str], dict[int, float]] = field(default_factory=dict)  # partition -> when
    savings: list[Saving] = field(default_factory=list)

    def apply(self, record: dict[str, Any]) -> None:
        kind, attempt, name = record["type"], record["attempt"], record.get("stage")
        if kind == ev.ACTION_REPLAYED:
            self._replayed(record)
            return
        if not isinstance(name, str):
            return
        if kind == ev.STAGE_COMMITTED and isinstance(record.get("duration_s"), (int, float)):
            self.durations[name] = float(record["duration_s"])
        elif kind == ev.STAGE_SKIPPED:
            recorded = self.durations.get(name)
            if recorded is not None and not str(record.get("reason") or "").startswith("output lost"):
                self.savings.append(Saving(attempt, name, round(recorded, 3), "skipped"))
        elif kind == ev.WRITE_STARTED:
            self._write_started(attempt, name, record)
        elif kind == ev.TASK_COMMITTED and isinstance(record.get("partition"), int):
            self.task_done.setdefault((attempt, name), {})[record["partition"]] = _seconds(record["ts"])

    def _replayed(self, record: dict[str, Any]) -> None:
        """A replayed action saved what running it took; a loaded model saved its training less
        what loading it took (its loader reads the model's folder in Spark jobs)."""
        saved = _number(record.get("saved_s"))
        if saved is None:
            return
        if record.get("kind") in MODEL_ACTIONS:
            net = max(saved - (_number(record.get("duration_s")) or 0.0), 0.0)
            self.savings.append(Saving(record["attempt"], None, round(net, 3), f"loaded {models_of(record)} model"))
        else:
            self.savings.append(Saving(record["attempt"], None, round(saved, 3), "replayed 1 action"))

    def _write_started(self, attempt: int, name: str, record: dict[str, Any]) -> None:
        self.write_start[(attempt, name)] = _seconds(record["ts"])
        kept = {p for p in record.get("kept") or [] if isinstance(p, int)}
        for earlier in range(1, attempt):
            done = self.task_done.get((earlier, name), {})
            began = self.write_start.get((earlier, name))
            reused = [when for partition, when in done.items() if partition in kept]
            if began is not None and reused:
                seconds = round(max(max(reused) - began, 0.0), 3)
                self.savings.append(Saving(attempt, name, seconds, f"kept {len(reused)} partitions"))


class Folded(Protocol):
    """What ``of`` reads of the run state's fold (``core/fold/runstate.py``, which feeds this module's
    ``SavingsFold``: described here, not imported, so the two modules do not import each other)."""

    @property
    def attempts(self) -> Mapping[int, object]: ...
    @property
    def shuffles(self) -> dict[str, kept_shuffles.ShuffleState]: ...
    @property
    def saved(self) -> SavingsFold: ...


def of(state: Folded, attempts: Iterable[int] | None = None) -> list[Saving]:
    """Every saving of the run (of ``attempts`` only, when given), in attempt order."""
    wanted = set(state.attempts if attempts is None else attempts)
    found = [saving for saving in state.saved.savings if saving.attempt in wanted]
    for attempt in sorted(wanted):
        for stage, count, seconds in kept_shuffles.reused_work(state.shuffles, attempt):
            found.append(Saving(attempt, stage, seconds, f"reused {count} map outputs"))
    return sorted(found, key=lambda saving: saving.attempt)


def total(savings: Iterable[Saving]) -> float:
    return round(sum(saving.seconds for saving in savings), 3)


def sentence(savings: list[Saving]) -> str:
    """The one line both the command's summary and the report say it in."""
    if not savings:
        return "recovery saved nothing: no stage, partition, map output or action of an earlier attempt was reused"
    skipped = sum(1 for s in savings if s.how == "skipped")
    partitions = sum(int(s.how.split()[1]) for s in savings if s.how.startswith("kept "))
    maps = sum(int(s.how.split()[1]) for s in savings if s.how.startswith("reused "))
    actions = sum(int(s.how.split()[1]) for s in savings if s.how.startswith("replayed "))
    models = sum(int(s.how.split()[1]) for s in savings if s.how.startswith("loaded "))
    parts = [f"{skipped} stage{'s' if skipped != 1 else ''} skipped"] if skipped else []
    parts += [f"{partitions:,} partition{'s' if partitions != 1 else ''} kept"] if partitions else []
    parts += [f"{maps:,} map output{'s' if maps != 1 else ''} reused"] if maps else []
    parts += [f"{actions:,} action{'s' if actions != 1 else ''} replayed"] if actions else []
    parts += [f"{models:,} model{'s' if models != 1 else ''} loaded"] if models else []
    return (
        f"recovery saved about {humanize.duration(total(savings))} of work done by earlier attempts "
        f"({', '.join(parts)})"
    )
