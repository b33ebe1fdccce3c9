"""Task-level resume under Hadoop's manifest committer (docs/task-resume.md, "task manifests are adopted in place").

Its protocol: a task commits by writing ``<target>/_temporary/<job uuid>/00/manifests/task_…-manifest.json``,
which names each file the task left in ``…/00/tasks/<attempt>/`` by absolute path and where the job
commit renames it; the job commit renames the files of every manifest in its job's folder, then
removes ``_temporary``. A dead job leaves its manifests and their files. A resumed write keeps them:

1. before anything cleans the target (``set_aside``), the manifests ``adopt`` chose stay where they
   are (their paths are absolute: they cannot move), in the one job folder that holds them; every
   other folder of ``_temporary`` goes (but the job folders holding their files: a resume that died
   too had moved the manifests it adopted into its own job's folder), and so do the manifests not
   kept there, the dead job's folder too when nothing of it is kept;
2. once the write's shape is known (``keep``), the partitions the plan keeps with a manifest in that
   folder are kept; only an ``overwrite`` (whose delete spares the dead job's folder) or an
   ``append`` (whose undo spares ``_temporary``) gets this far (``partitions.write_committer``);
3. ``ResumingCommitProtocol`` moves the kept manifests into the new job's manifests folder at job
   setup, and its job commit renames their files with the new ones.
"""

from __future__ import annotations

from sparkrecover.core.fold import kept_partitions
from sparkrecover.driver.tasks.committers import Adopted, Committer, Kept, agreed, at, remove
from sparkrecover.kinds import CommitKind
from sparkrecover.rundir import storage, taskfiles, tasklists


class ManifestCommitter(Committer):
    """Its committed tasks' manifests, kept in place in the dead job's manifests folder."""

    kind = CommitKind.MANIFESTS

    def set_aside(self, adopted: Adopted) -> None:
        temporary = storage.join(self.write.url, "_temporary")
        chosen = adopted.chosen
        if not chosen:
            remove(temporary)
            return
        fs, path = storage.data_filesystem(temporary)
        place = taskfiles.place_of(next(iter(chosen.values())))
        # The job folder of the manifests (<uuid> of .../_temporary/<uuid>/<NN>/manifests), and those of
        # their files.
        jobs = {place.rsplit("/", 3)[1]}.union(*(tasklists.source_jobs(task) for task in chosen.values()))
        for name in fs.ls(path, detail=False):
            if name.rstrip("/").rsplit("/", 1)[-1] not in jobs:
                fs.rm(name, recursive=True)
        kept = {task.path for task in chosen.values()}
        for candidates in adopted.found.values():  # one manifest a partition: the job commit publishes every one
            for task in candidates:
                if taskfiles.place_of(task) == place and task.path not in kept:
                    fs.rm(task.path)

    def waits_in_place(self) -> bool:
        return self.write.left_in_place()

    def keep(self, changed: str | None) -> Kept | None:
        tasks = self.write.tasks
        if tasks is None:
            return None
        # Kept in place, in the dead job's manifests folder (``set_aside`` left only that job's).
        found = tasklists.manifests(self.write.url)
        chosen = kept_partitions.choose(self.kind, found, tasks.kept, set(tasks.empty))
        place = taskfiles.place_of(next(iter(chosen.values()))) if chosen else None
        if not place:
            return None
        if changed is not None:
            return Kept(refusal=changed, in_place=True)  # what waits there goes (``clear``)
        kept = agreed(tasks, at({p: [task] for p, task in chosen.items()}, place))
        return Kept(kept, place, bool(kept))

    def clear(self) -> None:
        remove(storage.join(self.write.url, "_temporary"))  # the job commit would publish them otherwise
