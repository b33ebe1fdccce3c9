"""Task-level resume under the S3A magic committer (docs/task-resume.md, "pendingsets are adopted").

Its protocol: a task writes each file as a multipart upload left open at its final key, and commits
by writing one ``<target>/__magic/job-<uuid>/task_…_m_<partition>.pendingset`` (``__magic_job-<uuid>/``
from Hadoop 3.4) that lists them; the job commit completes the uploads of every pendingset in its
own job's folder. A dead job leaves its pendingsets and their open uploads. A resumed write keeps
them:

1. before anything cleans the target (``set_aside``), the pendingsets ``adopt`` chose (each with all
   its uploads still open) stay in the dead job's folder for an ``overwrite`` or ``append``, or move
   into the hidden ``kept`` folder beside the target for a write that needs the target gone; every
   other task's uploads are aborted and the committer's other folders removed: nothing else of the
   dead job is ever completed;
2. once the write's shape is known (``keep``), the kept partitions' pendingsets are kept only when
   nothing else could be loaded with them: the job commit loads every pendingset of its folder, and
   a set-aside cut short by an error leaves others (then nothing is kept, and the write runs under a
   UUID of its own);
3. the write runs under the dead job's S3A UUID (``Kept.job``), so its job commit completes the kept
   uploads with the new ones; ``ResumingCommitProtocol`` moves set-aside pendingsets back into the
   job's folder at job setup.
"""

from __future__ import annotations

from sparkrecover.driver.process import messages
from sparkrecover.driver.tasks.committers import Adopted, Committer, Kept, abort_uploads, agreed, at, remove
from sparkrecover.errors import StorageError
from sparkrecover.kinds import CommitKind
from sparkrecover.rundir import storage, taskfiles, tasklists


class MagicCommitter(Committer):
    """Its committed tasks' pendingsets, kept in the dead job's folder or set aside beside the target."""

    kind = CommitKind.PENDINGSETS

    def set_aside(self, adopted: Adopted) -> None:
        url, aside = self.write.url, self.write.aside
        fs, root = storage.data_filesystem(url)
        chosen = adopted.chosen if aside is not None else {}  # (usable: its uploads all still open)
        places = {taskfiles.place_of(task) for task in chosen.values()}
        kept_path = storage.data_filesystem(aside)[1] if aside is not None else None
        in_place = len(places) == 1 and kept_path not in places and taskfiles.keeps_in_place(url, self.write.mode)
        for candidates in adopted.found.values():
            for task in candidates:
                if chosen.get(task.partition) is not task and (in_place or taskfiles.place_of(task) == kept_path):
                    fs.rm(task.path)
        if chosen and not in_place and kept_path is not None:
            fs.makedirs(kept_path, exist_ok=True)
            for task in chosen.values():
                if taskfiles.place_of(task) != kept_path:
                    fs.mv(task.path, f"{kept_path}/{task.path.rsplit('/', 1)[-1]}")
        abort = getattr(fs, "abort_uploads", None)
        if abort is not None:
            abort(root, {upload for task in chosen.values() for upload in task.uploads})
        job = places.pop() if in_place else None
        for folder in tasklists.magic_job_dirs(url):
            if folder != job:
                fs.rm(folder, recursive=True)
        if job is None:
            remove(storage.join(url, tasklists.MAGIC_DIR))
        else:
            remove(storage.join(url, job[len(root.rstrip("/")) + 1 :], "tasks"))  # the dead job's tasks in flight
            if aside is not None:
                remove(aside)

    def waits_in_place(self) -> bool:
        return False  # only once ``keep`` found the dead job's one folder

    def keep(self, changed: str | None) -> Kept | None:
        write = self.write
        jobs = tasklists.magic_job_dirs(write.url)
        if write.set_aside_before:
            place, in_place = write.aside, False
        else:  # kept in place, in the dead job's folder (``set_aside`` left only that one)
            in_place = len(jobs) == 1
            place = jobs[0] if in_place else None
        if not place:
            return None
        if changed is not None:
            return Kept(refusal=changed, in_place=in_place)  # what waits in place goes (``clear``)
        # Listed by name: ``set_aside`` read them; one read more for the job's UUID.
        path = place if in_place else storage.data_filesystem(place)[1]
        here = at(tasklists.kept_pendingsets(write.url, path), path)
        kept = agreed(write.tasks, here)
        if not kept:
            return Kept()
        others = [p for p, found in here.items() if found and p not in kept]
        strays = [job for job in jobs if job != place]
        if others or strays:
            refusal = "the dead job's other pendingsets could not all be cleared: nothing is kept"
            return Kept(refusal=refusal, in_place=in_place)
        return Kept(kept, place, in_place, job=tasklists.job_of(write.url, here[kept[0]][0]))

    def clear(self) -> None:
        url = self.write.url
        try:  # nothing of this write runs yet: every upload below the target is the dead job's
            abort_uploads(url, None)
            for folder in tasklists.magic_job_dirs(url):
                storage.data_filesystem(url)[0].rm(folder, recursive=True)
            remove(storage.join(url, tasklists.MAGIC_DIR))
        except (OSError, StorageError) as error:  # the write runs under its own UUID: none of it is loaded
            messages.say(f"sparkrecover: warning: the dead job's pendingsets below {url} not removed: {error}")
