"""Why a resumed write keeps nothing of an earlier attempt's partitions (no Spark)."""

from __future__ import annotations

from sparkrecover.driver import partitions, taskresume
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
