"""The one rule of kept write partitions (core/fold/kept_partitions.py), on records as the journal
holds them; the fold, the planner and the report read it (tests/core/test_task_progress.py,
tests/core/test_report.py), the driver asks it too (tests/driver/test_shape_changes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkrecover.core.fold import kept_partitions as kp
from sparkrecover.kinds import CommitKind


def write_started(attempt, shape="s1", partitions=4, kept=(), reusable=True):
    return {
        "type": "write.started",
        "attempt": attempt,
        "stage": "w",
        "shape": shape,
        "partitions": partitions,
        "kept": list(kept),
        "reusable": reusable,
    }


def task(attempt, partition, rows=10):
    return {"type": "task.committed", "attempt": attempt, "stage": "w", "partition": partition, "records": rows}


def test_partitions_carry_over_only_to_a_write_with_the_same_partitions():
    assert kp.same_partitions("s1", 4, "s1", 4, now_reusable=True)
    assert not kp.same_partitions("s1", 4, "s2", 4, now_reusable=True)
    assert not kp.same_partitions("s1", 4, "s1", 5, now_reusable=True)
    assert not kp.same_partitions("s1", 4, "s1", 4, now_reusable=False)


def test_only_what_the_journal_and_the_evidence_agree_on_is_kept():
    assert kp.agreed([3, 0, 1], {1, 3, 7}) == [1, 3]
    assert kp.agreed([], {1}) == [] and kp.agreed([1], set()) == []


def test_computed_by_attempt_n_kept_by_n_plus_1():
    progress = kp.on_write_started(None, write_started(1))
    kp.task_committed(progress, task(1, 0))
    kp.task_committed(progress, task(1, 2, rows=0))
    kp.task_committed(progress, task(2, 3))  # another attempt's task: not this write's
    progress = kp.on_write_started(progress, write_started(2, kept=[0, 2]))
    kp.task_committed(progress, task(2, 0, rows=0))  # a kept partition's empty task: not computed again
    kp.task_committed(progress, task(2, 1))
    assert progress.unfinished == {0: (1, 10), 2: (1, 0), 1: (2, 10)}
    kept = kp.to_keep(progress, evidence={0, 1, 2, 3})
    assert kept is not None and (kept.kept, kept.partitions, kept.shape, kept.empty) == ([0, 1, 2], 4, "s1", [2])
    assert [state for _, state, _ in kp.cells(progress)] == [kp.KEPT, kp.COMPUTED, kp.KEPT, kp.UNFINISHED]
    summary = kp.stage_committed(progress, 2)
    assert summary is not None
    assert (summary["kept"], summary["computed"], summary["by_attempt"], summary["kept_from"]) == (
        2,
        2,
        {"1": 2, "2": 2},
        {"1": [0, 2]},
    )
    assert progress.unfinished == {} and kp.to_keep(progress, {0, 1, 2}) is None
    # A write after the commit starts from nothing, whatever its shape.
    assert kp.on_write_started(progress, write_started(3)).computed == {}


# -- what a resumed write adopts of the committers' evidence (kp.adopt) ------------------------


@dataclass
class Found:
    """A committed task as the committers' evidence shows it (rundir/taskfiles.TaskFolder's fields)."""

    partition: int
    place: str = "job"
    files: list = field(default_factory=lambda: [("part", 10)])
    problem: str | None = None
    job: str | None = None
    uuids: set = field(default_factory=set)


def evidence(**kinds):
    """A reader of each kind's tasks by partition, and the kinds it was asked for."""
    asked = []

    def read(kind):
        asked.append(str(kind))
        return {t.partition: [t] for t in kinds.get(str(kind), [])}

    return read, asked


def never_began(found):
    return False


def test_one_committer_s_tasks_are_adopted_the_others_are_not_even_read():
    read, asked = evidence(pendingsets=[Found(0)], manifests=[Found(1)], folders=[Found(2)])
    adopted = kp.adopt(read, {0, 1, 2}, set(), never_began)
    assert (adopted.kind, sorted(adopted.chosen), asked) == (CommitKind.PENDINGSETS, [0], ["pendingsets"])
    read, asked = evidence(manifests=[Found(1)], folders=[Found(2)])
    assert sorted(kp.adopt(read, {1, 2}, set(), never_began).chosen) == [1]
    read, asked = evidence()
    assert kp.adopt(read, {1}, set(), never_began).chosen == {} and asked == ["pendingsets", "manifests", "folders"]


def test_a_job_commit_that_had_begun_is_asked_of_the_adopted_tasks_only_and_only_when_some_are_wanted():
    seen = []

    def began(found):
        seen.append(sorted(found))
        return True

    read, _ = evidence(manifests=[Found(1), Found(3)], folders=[Found(2)])
    adopted = kp.adopt(read, {1}, set(), began)
    assert (adopted.began, adopted.chosen, sorted(adopted.found), seen) == (True, {}, [1, 3], [[1, 3]])
    assert kp.adopt(read, set(), set(), began).began is False and len(seen) == 1


def test_the_journal_agrees_first_then_one_job_or_one_place():
    """Of the tasks the journal says committed: one S3A job's pendingsets (else none), the manifests of
    the job folder holding most of them; a task the journal never heard of changes nothing."""
    pendingsets = [Found(0, job="a"), Found(1, job="a"), Found(2, job="b")]
    assert sorted(kp.adopt(evidence(pendingsets=pendingsets)[0], {0, 1}, set(), never_began).chosen) == [0, 1]
    assert kp.adopt(evidence(pendingsets=pendingsets)[0], {0, 1, 2}, set(), never_began).chosen == {}
    manifests = [Found(0, place="x"), Found(1, place="x"), Found(2, place="y"), Found(3, place="y")]
    assert sorted(kp.adopt(evidence(manifests=manifests)[0], {1, 2, 3}, set(), never_began).chosen) == [2, 3]
    folders = [Found(0, place="job"), Found(1, place="aside")]  # task folders: any place
    assert sorted(kp.adopt(evidence(folders=folders)[0], {0, 1}, set(), never_began).chosen) == [0, 1]


def test_a_usable_task_is_the_one_with_files_or_an_empty_one_the_journal_says_wrote_no_rows():
    found = {
        0: [Found(0), Found(0, files=[])],  # an empty task's folder beside the one with files
        1: [Found(1), Found(1)],  # two with files: which is whole?
        2: [Found(2, files=[])],
        3: [Found(3, problem="files of 2 writes")],
    }
    assert sorted(kp.usable(found, empty_ok=set())) == [0]
    assert sorted(kp.usable(found, empty_ok={2})) == [0, 2]
