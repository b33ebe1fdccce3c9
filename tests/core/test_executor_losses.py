"""An executor lost while an attempt ran, and what it cost, folded from journal fixtures (no Spark):
the map tasks Spark ran again (its map stages after the loss, as adaptive execution submits them:
new stages of shuffles whose map stage had completed, or second attempts of a stage), and the
map outputs served from kept copies (``shuffle.served``)."""

from __future__ import annotations

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views import summary, timeline
from sparkrecover.journal import events as ev
from tests.core.test_shuffles import record


def map_stage(spark_stage: int, shuffle: int, tasks: int, spark_attempt: int = 0, attempt: int = 1) -> dict:
    return record(
        ev.SPARK_STAGE_COMPLETED, attempt, spark_stage=spark_stage, spark_attempt=spark_attempt, stage="w",
        tasks=tasks, completed_tasks=tasks, failed_tasks=0, killed_tasks=0, spark_shuffle=shuffle,
    )  # fmt: skip


def lost(executor: str = "0", attempt: int = 1) -> dict:
    return record(ev.EXECUTOR_LOST, attempt, executor=executor, host="10.0.0.7", reason="Command exited with code 137")


# The journal of tests/e2e/test_cluster_executor_loss.py's first attempt, as its listener wrote it:
# three shuffles' map stages, the executor lost in the write, then adaptive execution's reruns.
BEFORE = [map_stage(0, 1, 2), map_stage(1, 0, 8), map_stage(4, 2, 8)]
AFTER = [map_stage(5, 1, 1), map_stage(6, 0, 4), map_stage(7, 2, 4, spark_attempt=1)]


def test_the_map_tasks_run_again_after_a_loss_are_counted_from_the_stage_attempts():
    state = RunState.from_events("r", [*BEFORE, lost(), *AFTER])
    (loss,) = state.lost_executors.losses
    assert (loss.executor, loss.host, loss.map_tasks_again) == ("0", "10.0.0.7", 9)
    assert loss.describe() == "executor 0 on 10.0.0.7 lost (Command exited with code 137): 9 map tasks run again"
    # The same through apply(), record by record (inspect --follow folds that way).
    one_by_one = RunState("r")
    for item in [*BEFORE, lost(), *AFTER]:
        one_by_one.apply(item)
    assert one_by_one.lost_executors.losses == state.lost_executors.losses


def test_map_stages_of_new_shuffles_and_of_other_attempts_are_not_counted():
    resumed = [map_stage(0, 1, 2, attempt=2)]  # a resumed application numbers its shuffles anew
    state = RunState.from_events("r", [map_stage(0, 1, 2), lost(), map_stage(3, 5, 6), *resumed])
    (loss,) = state.lost_executors.losses
    assert loss.map_tasks_again == 0 and loss.cost() == "0 map tasks run again"


def test_map_outputs_served_from_copies_are_shown_by_shuffle_served():
    served = record(ev.SHUFFLE_SERVED, identity="abc", executor="0", served=[0, 2, 4, 6], recomputed=[7])
    state = RunState.from_events("r", [*BEFORE, lost(), served, map_stage(6, 0, 1)])
    (loss,) = state.lost_executors.losses
    assert (loss.served, loss.recomputed, loss.map_tasks_again) == (4, 1, 1)
    assert loss.cost() == "4 map outputs served from copies, 1 map task run again"
    assert timeline.fact(served) == (
        "shuffle abc: 4 map outputs of lost executor 0 served from copies, 1 computed again (copy not yet durable)"
    )


def test_inspect_replay_and_report_carry_the_loss():
    state = RunState.from_events("r", [*BEFORE, lost(), *AFTER])
    (row,) = summary.run_summary(state, "/runs/r", lease_live=False)["executors_lost"]
    assert row["map_tasks_again"] == 9 and row["host"] == "10.0.0.7" and row["text"].endswith("9 map tasks run again")
    assert timeline.fact(lost()) == "executor 0 on 10.0.0.7 lost: Command exited with code 137"
    assert timeline.fact(AFTER[0]).endswith("(map stage of Spark shuffle 1)")
