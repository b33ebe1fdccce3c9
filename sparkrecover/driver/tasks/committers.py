"""What task-level resume asks of an output committer (docs/task-resume.md): one strategy a kind of
committer, each in its own module with its own protocol, behind this interface.

- FileOutputCommitter's task folders (``file_output_committer``);
- the S3A magic committer's pendingsets (``magic_committer``);
- the manifest committer's task manifests (``manifest_committer``).

``taskresume`` chooses one for a write (by the committer whose tasks ``core/fold/kept_partitions.adopt``
adopted, before the target is cleaned; by the write's own committer once its DataFrame is known)
and runs the steps; a strategy knows where its kind's tasks wait and how they are kept. What is
kept is decided by ``adopt`` alone: a strategy keeps what it is handed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from sparkrecover.core.fold import kept_partitions
from sparkrecover.kinds import CommitKind
from sparkrecover.rundir import storage, taskfiles, tasklists
from sparkrecover.rundir.plans import KeptTasks

Adopted = kept_partitions.Adopted[taskfiles.TaskFolder]
Found = dict[int, list[taskfiles.TaskFolder]]


@dataclass(frozen=True)
class ResumedWrite:
    """A write about to run again, as a committer's strategy sees it."""

    url: str  # the target, as fsspec names it
    mode: str | None  # its save mode (None: not known yet, for a declared stage's write)
    tasks: KeptTasks | None  # what the plan keeps of it (None: not a ``continue``)
    aside: str | None  # the hidden folder beside the target tasks are set aside in (None: at a bucket's root)
    # Something waits in ``aside`` already (what the set-aside moved there): read by the plan step
    # only, once, before anything of it runs.
    set_aside_before: bool = False

    def left_in_place(self) -> bool:
        """Whether the plan's kept tasks wait below the target, where the dead job left them: none were
        set aside, and on an object store the write's mode lets them stay (``taskfiles.keeps_in_place``)."""
        return bool(self.tasks) and not self.set_aside_before and taskfiles.keeps_in_place(self.url, self.mode)


@dataclass
class Kept:
    """What a write keeps of the tasks waiting for it, and how its job commit finds them."""

    partitions: list[int] = field(default_factory=list)
    place: str | None = None  # the folder the kept tasks wait in (a URL or a data filesystem path)
    in_place: bool = False  # where the dead job left them, below the target (taskfiles.keeps_in_place)
    job: str | None = None  # the S3A job UUID the write runs under (the magic committer's pendingsets)
    refusal: str | None = None  # why nothing of what waits is kept


class Committer(ABC):
    """One kind of output committer, for one resumed write (``write``)."""

    kind: ClassVar[CommitKind]

    def __init__(self, write: ResumedWrite) -> None:
        self.write = write

    def evidence(self) -> Found:
        """Its committed tasks below the target and set aside, by partition: what ``adopt`` reads."""
        return tasklists.committed(self.write.url, self.kind)

    @abstractmethod
    def set_aside(self, adopted: Adopted) -> None:
        """Step 1, before anything cleans the target: keep the ``adopted`` tasks its way (set aside
        beside the target, or left where the dead job left them); the rest of its tasks go."""

    @abstractmethod
    def waits_in_place(self) -> bool:
        """Whether its tasks wait where the dead job left them, as far as is known before looking."""

    @abstractmethod
    def keep(self, changed: str | None) -> Kept | None:
        """Step 2, once the write's shape is known: which of the tasks waiting for the write it keeps
        (none, saying so, when ``changed`` says why partition i is not what it was), and how the
        job commit finds them; None where nothing waits."""

    @abstractmethod
    def clear(self) -> None:
        """Nothing of what waits in place is kept: remove it, or the write's job commit would load it."""


def at(found: Found, place: str) -> Found:
    """The tasks of ``found`` that wait in ``place`` (a path of the data filesystem), by partition."""
    return {p: [task for task in candidates if taskfiles.place_of(task) == place] for p, candidates in found.items()}


def agreed(tasks: KeptTasks | None, waiting: Found) -> list[int]:
    """The partitions the plan keeps that have a task waiting."""
    return kept_partitions.agreed(tasks.kept if tasks else [], [p for p, here in waiting.items() if here])


def abort_uploads(url: str, aside: str | None) -> None:
    """Abort the open multipart uploads below the target and below ``aside`` (on an object store)."""
    for place in (url, aside):
        if place is not None and not storage.is_local(place):
            fs, path = storage.data_filesystem(place)
            abort = getattr(fs, "abort_uploads", None)
            if abort is not None:
                abort(path)


def remove(url: str) -> None:
    """Remove a folder of the data's filesystem, if it is there."""
    if storage.is_local(url):
        import shutil

        shutil.rmtree(storage.normalize(url), ignore_errors=True)
        return
    fs, path = storage.data_filesystem(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)
