"""The one rule of kept write partitions (core/fold/kept_partitions.py), on records as the journal
holds them; the fold, the planner and the report read it (tests/core/test_task_progress.py,
tests/core/test_report.py), the driver asks it too (tests/driver/test_shape_changes.py)."""

from __future__ import annotations

from sparkrecover.core.fold import kept_partitions as kp


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
    progress = kp.started(None, write_started(1))
    kp.task_committed(progress, task(1, 0))
    kp.task_committed(progress, task(1, 2, rows=0))
    kp.task_committed(progress, task(2, 3))  # another attempt's task: not this write's
    progress = kp.started(progress, write_started(2, kept=[0, 2]))
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
    assert kp.started(progress, write_started(3)).computed == {}
