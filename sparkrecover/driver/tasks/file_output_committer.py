"""Task-level resume under Hadoop's FileOutputCommitter, algorithm 1 (Spark's default; docs/task-resume.md).

Its protocol: a task commits by renaming its attempt folder to ``<target>/_temporary/0/task_*``; the
job commit merges every such folder into the target, then writes ``_SUCCESS``. A dead job leaves the
folders of the tasks that committed. A resumed write keeps them:

1. before anything cleans the target (``set_aside``), the folders ``adopt`` chose are renamed into
   the hidden ``kept`` folder beside the target, outside what an overwrite deletes; the other
   partitions' folders there go. On an object store, where a rename copies every file, an
   ``overwrite`` or ``append`` leaves them where they are instead (``taskfiles.keeps_in_place``),
   with everything else of ``_temporary`` removed (its job commit would merge it). The dead writer's
   open multipart uploads are aborted either way;
2. once the write's shape is known (``keep``), the partitions the plan keeps that have a folder
   waiting (set aside, or in the job attempt folder) are kept;
3. ``ResumingCommitProtocol`` renames the set-aside folders into the new job's ``_temporary/0`` at job
   setup (those kept in place are there already), and its job commit merges them with the new ones.

A crash between any two steps leaves folders that the next resume finds again, set aside or in place
(docs/decisions/0009-task-level-resume.md).
"""

from __future__ import annotations

from sparkrecover.driver.tasks.committers import Adopted, Committer, Found, Kept, abort_uploads, agreed, at, remove
from sparkrecover.kinds import CommitKind
from sparkrecover.rundir import storage, taskfiles, tasklists


class FileOutputCommitter(Committer):
    """Its committed task folders, set aside beside the target or kept in its job attempt folder."""

    kind = CommitKind.FOLDERS

    def evidence(self) -> Found:
        if not (self.write.tasks and self.write.aside):
            return {}  # none kept: the write's own job cleanup removes them
        return tasklists.committed(self.write.url, self.kind)

    def set_aside(self, adopted: Adopted) -> None:
        write = self.write
        abort_uploads(write.url, write.aside)
        if write.tasks and write.aside:
            if taskfiles.keeps_in_place(write.url, write.mode) and not storage.data_exists(write.aside):
                self._keep_in_place(adopted)
            else:
                self._move_aside(write.aside, adopted)

    def waits_in_place(self) -> bool:
        return self.write.left_in_place()

    def keep(self, changed: str | None) -> Kept | None:
        write, in_place = self.write, self.waits_in_place()
        place = taskfiles.job_attempt_dir(write.url) if in_place else write.aside if write.set_aside_before else None
        if not place:
            return None
        if changed is not None:
            return Kept(refusal=changed)  # what waits in place goes with _temporary (``clear``)
        found = taskfiles.task_folders(write.url)
        kept = agreed(write.tasks, at(found, storage.data_filesystem(place)[1]))
        return Kept(kept, place, in_place and bool(kept))

    def clear(self) -> None:
        remove(storage.join(self.write.url, "_temporary"))  # the job commit would merge them otherwise

    def _move_aside(self, aside: str, adopted: Adopted) -> None:
        if adopted.began:
            remove(aside)
            return
        chosen = adopted.chosen
        fs, kept_path = storage.data_filesystem(aside)
        for partition, candidates in adopted.found.items():  # what is not kept must not be merged later
            for folder in candidates:
                if taskfiles.place_of(folder) == kept_path and chosen.get(partition) is not folder:
                    fs.rm(folder.path, recursive=True)
        fs.makedirs(kept_path, exist_ok=True)
        for folder in chosen.values():
            if taskfiles.place_of(folder) != kept_path:
                # One rename per task: atomic where renames are (a crash loses nothing); on an object
                # store a copy of each file, and a crash leaves files in both places: never kept.
                fs.mv(folder.path, f"{kept_path}/{folder.path.rsplit('/', 1)[-1]}")

    def _keep_in_place(self, adopted: Adopted) -> None:
        """Leave in the job attempt folder only the task folders the write will keep: the rest (other
        partitions' folders, tasks in flight, other job attempts) would be merged by its job commit."""
        url = self.write.url
        temporary = storage.join(url, "_temporary")
        if adopted.began:
            remove(temporary)
            return
        keep = {task.path for task in adopted.chosen.values()}
        fs, attempt = storage.data_filesystem(taskfiles.job_attempt_dir(url))
        for folder, spared in ((storage.data_filesystem(temporary)[1], attempt), (attempt, None)):
            try:
                entries = fs.ls(folder, detail=False)
            except FileNotFoundError:
                continue
            for name in entries:
                name = name.rstrip("/")
                if name != spared and name not in keep:
                    fs.rm(name, recursive=True)
