"""The closed sets of words the journal and the plan use: a stage's status as the journal leaves
it, and what resume decides for it (docs/design.md §8). Each member *is* its text, so it compares,
formats and serializes as the string the journal and plans hold."""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class StageStatus(TextEnum):
    STARTED = "started"
    COMMITTED = "committed"
    FAILED = "failed"


class Verdict(TextEnum):
    SKIP = "skip"  # committed, output verified: not run
    RUN = "run"  # started or failed, never committed: runs (§4 rule 2)
    RERUN = "rerun"  # committed, but runs again (asked for, lost and needed, upstream reruns)
    LOST = "lost"  # committed, output gone, nothing that runs needs it (§4 rule 4)
    CONTINUE = "continue"  # a write that started: its committed partitions are kept, the rest run


class CommitKind(TextEnum):
    """How a write's committed tasks wait for its job commit, as far as a resumed write can keep
    them (docs/task-resume.md): FileOutputCommitter's task folders, the S3A magic committer's
    pendingsets, the manifest committer's task manifests."""

    FOLDERS = "folders"
    PENDINGSETS = "pendingsets"
    MANIFESTS = "manifests"


# The kind (``stage.started``'s ``kind``) of a ``foreach``/``foreachPartition`` stage: nothing of
# ours holds its side effects, so the journal alone says which of its partitions finished.
FOREACH = "foreach"


# Actions whose recorded result is a trained model (driver/recall/models.py): a resume loads it
# with its class's own loader, which reads the model's folder in Spark jobs of its own, so the
# plan says "load", not "replay" (docs/decisions/0060-a-replayed-model-is-loaded.md).
MODEL_ACTIONS = frozenset({"ml.fit", "mllib.train"})
