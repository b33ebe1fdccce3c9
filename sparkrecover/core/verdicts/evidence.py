"""What the core needs to know of storage, as one parameter: the planner and the views never read
storage themselves (they are pure: a fold of the journal and what they are told). The command line
and a restarted driver pass ``planning/storage_evidence.StorageEvidence``; tests may pass their own."""

from __future__ import annotations

from typing import Any, Protocol

from sparkrecover.core.fold.runstate import StageState


class Evidence(Protocol):
    def verify(self, stage: StageState) -> list[str]:
        """Problems of a committed stage's outputs against the manifest it recorded (none: intact)."""
        ...

    def committed_partitions(self, stage: StageState) -> tuple[set[int], str | None]:
        """Partitions of an unfinished write whose committed task output survives and that the
        driver will keep (``kept_partitions.adopt``), or why none can be kept."""
        ...

    def stat(self, url: str) -> tuple[int, Any]:
        """(size, modification time) of a file; ``OSError`` when it is gone."""
        ...
