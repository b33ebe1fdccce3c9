"""What survives on storage, read for the planner and the views (``core/evidence.Evidence``): the
core decides, this module looks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkrecover.core.runstate import StageState
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
        empty_ok = {p for p, (_, rows) in stage.committed_tasks.items() if rows == 0}
        out = stage.outputs[0]
        folders = taskfiles.task_folders(out)
        for partition, found in (tasklists.pendingsets(out) if tasklists.on_s3(out) else {}).items():
            folders.setdefault(partition, []).extend(found)  # the magic committer's pendingsets
        for partition, found in tasklists.manifests(out).items():
            folders.setdefault(partition, []).extend(found)  # the manifest committer's task manifests
        if taskfiles.job_commit_began(out, folders):
            return set(), "the dead attempt's job commit had begun, so what it left cannot be trusted"
        return set(taskfiles.usable(folders, empty_ok)), None

    def stat(self, url: str) -> tuple[int, Any]:
        return storage.data_stat(url)
