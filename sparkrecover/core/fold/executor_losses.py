"""Executors lost while an attempt ran, and what each loss cost (docs/shuffles.md, "An executor
lost"): the map tasks Spark ran again after it, and the map outputs served from kept copies
instead.

Fed by the run state's fold, in journal order:

- ``executor.lost`` (the JVM listener: an executor the driver did not let go) opens a loss;
- ``spark.stage.completed`` of a map stage (one that names its ``spark_shuffle``) counts its
  completed tasks against the attempt's latest loss when they ran a map stage again: a second
  attempt of a stage, or a stage of a shuffle whose map stage had already completed in that
  attempt (adaptive execution submits the rerun as a new stage of the same shuffle);
- ``shuffle.served`` (the running application answered the lost executor's map outputs from the
  kept copies) adds the map outputs served and those computed again because their copy was not
  durable yet.

Pure, like the rest of ``core/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExecutorLoss:
    attempt: int
    executor: str
    host: str | None
    reason: str | None
    ts: str
    map_tasks_again: int = 0  # map tasks Spark ran again after the loss (stage attempts journaled)
    served: int = 0  # map outputs served from kept copies (shuffle.served)
    recomputed: int = 0  # map outputs shuffle.served says were computed again (copy not durable)

    def cost(self) -> str:
        """``12 map tasks run again`` / ``8 map outputs served from copies, 2 computed again``."""
        parts = []
        if self.served:
            parts.append(f"{self.served} map output{'s' if self.served != 1 else ''} served from copies")
        again = max(self.map_tasks_again, self.recomputed)
        if again or not parts:
            parts.append(f"{again} map task{'s' if again != 1 else ''} run again")
        return ", ".join(parts)

    def describe(self) -> str:
        where = f" on {self.host}" if self.host else ""
        why = f" ({self.reason})" if self.reason else ""
        return f"executor {self.executor}{where} lost{why}: {self.cost()}"

    def row(self) -> dict[str, Any]:
        """As ``inspect --json`` and ``report`` show it."""
        return {
            "attempt": self.attempt,
            "executor": self.executor,
            "host": self.host,
            "reason": self.reason,
            "ts": self.ts,
            "map_tasks_again": self.map_tasks_again,
            "served": self.served,
            "recomputed": self.recomputed,
        }


@dataclass
class LossFold:
    losses: list[ExecutorLoss] = field(default_factory=list)
    # attempt -> the Spark shuffles whose map stage completed in it (a later one is a rerun)
    _finished: dict[int, set[int]] = field(default_factory=dict)

    def on_lost(self, record: dict[str, Any]) -> None:
        self.losses.append(
            ExecutorLoss(
                attempt=record["attempt"],
                executor=str(record.get("executor")),
                host=_text(record.get("host")),
                reason=_text(record.get("reason")),
                ts=record["ts"],
            )
        )

    def on_map_stage(self, record: dict[str, Any]) -> None:
        shuffle, number = record.get("spark_shuffle"), record["attempt"]
        if not isinstance(shuffle, int):
            return
        finished = self._finished.setdefault(number, set())
        again = shuffle in finished or int(record.get("spark_attempt") or 0) >= 1
        latest = self._latest(number)
        if again and latest is not None:
            latest.map_tasks_again += int(record.get("completed_tasks") or 0)
        if not record.get("failure"):
            finished.add(shuffle)

    def on_served(self, record: dict[str, Any]) -> None:
        """A ``shuffle.served`` record: counted against the loss of its executor in that attempt."""
        executor = str(record.get("executor"))
        served, recomputed = record.get("served"), record.get("recomputed")
        for loss in reversed(self.losses):
            if loss.attempt == record["attempt"] and loss.executor == executor:
                loss.served += len(served) if isinstance(served, list) else 0
                loss.recomputed += len(recomputed) if isinstance(recomputed, list) else 0
                return

    def _latest(self, attempt: int) -> ExecutorLoss | None:
        for loss in reversed(self.losses):
            if loss.attempt == attempt:
                return loss
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
