"""What survives on storage, read for the planner and the views (``core/evidence.Evidence``): the
core decides, this module looks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from sparkrecover.core.fold import kept_partitions
from sparkrecover.core.fold.runstate import StageState
from sparkrecover.errors import StorageError
from sparkrecover.rundir import manifests, storage, taskfiles, tasklists


class StorageEvidence:
    """Checks outputs against their manifests at ``level`` (size, footer, checksum), reads an
    unfinished write's committed task folders, and stats input files, on the run's storage."""

    def __init__(self, run_dir: str, level: str = "size", progress: Callable[[int], None] | None = None):
        self.run_dir, self.level, self.progress = run_dir, level, progress

    def verify(self, stage: StageState) -> list[str]:
        manifest = manifests.load_manifest(stage.committed or {}, self.run_dir)
        if manifest is None:
            return [f"the manifest recorded for {stage.name} is missing or was rewritten"]
        problems = manifests.verify_manifest(manifest, self.level)
        if self.progress:
            self.progress(sum(int(out.get("file_count") or 0) for out in manifest))
        return problems

    def committed_partitions(self, stage: StageState) -> tuple[set[int], str | None]:
        if not stage.outputs:
            return set(), "it has no output folder to keep tasks in"
        out = stage.outputs[0]
        progress = stage.write_progress
        wanted = progress.unfinished if progress is not None else {}
        empty_ok = {p for p, (_, rows) in stage.committed_tasks.items() if rows == 0}
        try:  # what the driver will keep, decided by the rule it follows (core/fold/kept_partitions.adopt)
            adopted = kept_partitions.adopt(
                partial(tasklists.committed, out), wanted, empty_ok, partial(taskfiles.job_commit_began, out)
            )
        except StorageError as error:  # cannot tell: nothing is kept, as the driver would
            return set(), f"its committed tasks could not be read ({error})"
        if adopted.began:
            return set(), "the dead attempt's job commit had begun, so what it left cannot be trusted"
        return set(adopted.chosen), None

    def stat(self, url: str) -> tuple[int, Any]:
        return storage.data_stat(url)
