"""Why a resumed write keeps nothing of an earlier attempt's partitions (no Spark)."""

from __future__ import annotations

from sparkrecover.driver.tasks import partitions, taskresume
from sparkrecover.rundir.plans import KeptTasks


def shape(digest="d1", count=8, specs_digest=None):
    return partitions.WriteShape(count, True, None, ["s"] * count, digest, ["0 1"], specs_digest)


def test_the_same_shape_keeps_its_partitions():
    tasks = KeptTasks(kept=[0], partitions=8, shape="d1", specs="a1")
    assert taskresume._changed(tasks, shape(specs_digest="a1")) is None


def test_other_post_shuffle_specs_are_named_as_the_reason():
    tasks = KeptTasks(kept=[0], partitions=8, shape="d1", specs="a1")
    reason = taskresume._changed(tasks, shape("d2", 3, "a2"))
    assert reason is not None and reason.startswith("the post-shuffle partitions differ")
    assert "8 partitions then, 3 now" in reason


def test_other_inputs_with_the_same_specs_say_so():
    tasks = KeptTasks(kept=[0], partitions=8, shape="d1", specs="a1")
    assert "input slices" in (taskresume._changed(tasks, shape("d2", 8, "a1")) or "")
    # A journal of an earlier version has no specs: the shape alone decides.
    assert "input slices" in (taskresume._changed(KeptTasks([0], 8, "d1"), shape("d2")) or "")


def test_the_specs_compared_are_those_the_plan_file_carried_to_the_driver():
    """The driver compares the specs of the plan it read, not of the plan the planner built: a
    write whose inputs changed, its post-shuffle partitions the same, is told so."""
    from sparkrecover.kinds import Verdict
    from sparkrecover.rundir import plans

    tasks = KeptTasks(kept=[0], partitions=8, shape="d1", specs="a1")
    entry = plans.PlanEntry("w", Verdict.CONTINUE, "1/8 partitions kept", kind="write", tasks=tasks)
    read = plans.read_plan(plans.encode(plans.Plan("r", 2, [entry])), "0002.json").stages[0].tasks
    assert read is not None and read.specs == "a1"
    reason = taskresume._changed(read, shape("d2", 8, "a1")) or ""
    assert reason.startswith("its partitions changed since the attempt that committed them"), reason
