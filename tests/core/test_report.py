"""The data behind ``sparkrecover report`` (core/views/report_data.py, core/views/grids.py) on recorded journals:
lanes, bars and their outcomes, durations on the journal's clock, time saved, partition grids."""

from __future__ import annotations

import os

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views import report_data, summary
from sparkrecover.core.views.grids import fold_grids
from sparkrecover.journal import read_journal
from tests.journals import SyntheticRun, crashed_run, invalidated_run, resumed_run


def page_of(run: SyntheticRun, **options) -> report_data.Report:
    collected = report_data.Collector(run.run_id)
    collected.feed(read_journal(run.dir))
    return collected.report(run.dir, **options)


def bars(lane: report_data.Lane) -> list[tuple[str, str]]:
    return [(bar.stage, bar.outcome) for bar in lane.bars]


def test_a_killed_and_resumed_run_has_two_lanes_and_saves_the_skipped_stages(tmp_path):
    page = page_of(resumed_run(tmp_path / "root"))
    first, second = page.lanes
    assert (first.outcome, second.outcome, page.status) == ("crashed", "succeeded", "succeeded")
    assert bars(first) == [("orders", "committed"), ("clean", "committed"), ("daily", "interrupted")]
    assert bars(second) == [("orders", "skipped"), ("clean", "skipped"), ("daily", "committed")]
    # The driver's death is marked where its journal stops; its exit was never recorded.
    assert [(m.kind, m.at_s) for m in first.marks] == [("died", first.duration_s)]
    assert first.exit.startswith("driver died")
    # Each skipped stage saved the duration its commit recorded (2.0s in these journals).
    assert [(s.attempt, s.stage, s.seconds, s.how) for s in page.savings] == [
        (2, "orders", 2.0, "skipped"),
        (2, "clean", 2.0, "skipped"),
    ]
    assert page.saved_s == 4.0 and second.saved_s == 4.0 and first.saved_s == 0.0
    assert page.from_zero_s == second.duration_s + 4.0
    assert first.story.startswith("Attempt 1 committed orders, clean; was cut off in daily, and its driver died")
    assert second.story == "Attempt 2 skipped orders, clean; committed daily, and succeeded."


def test_bars_sit_on_the_journals_clock_from_their_attempts_start(tmp_path):
    # The test clock moves 0.5s per event: orders starts 3 events after run.started (attempt.started,
    # driver.started), and commits after its Spark job's 3 events.
    page = page_of(crashed_run(tmp_path / "root"))
    (lane,) = page.lanes
    orders, clean, daily = lane.bars
    assert (orders.start_s, orders.end_s, orders.duration_s) == (1.5, 3.5, 2.0)
    assert clean.start_s == orders.end_s + 0.5
    # Cut off: the bar runs to the attempt's last event (its spark.job.ended).
    assert daily.end_s == lane.duration_s and daily.outcome == "interrupted"
    assert page.scale_s == lane.duration_s
    assert lane.startup_s == 1.0  # driver.started, the attempt's third event
    assert orders.target == os.path.join(os.path.dirname(str(tmp_path / "root")), "data", "orders")
    assert page.plan is None and page.from_zero_s is None


def test_a_gap_between_attempts_is_measured_and_a_plan_is_carried(tmp_path):
    run = crashed_run(tmp_path / "root")
    run.clock.tick(3600)
    run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"}).end(0)
    page = page_of(run)
    assert page.lanes[1].gap_s == 3600.5
    assert page.lanes[1].plan == "2 skip, 1 run"
    assert page.wall_s is not None and page.wall_s > 3600
    assert page.scale_s < 60  # lanes are drawn from their own start: an idle hour is not drawn


def test_invalidated_and_failed_stages_carry_their_reasons_and_the_failure(tmp_path):
    page = page_of(invalidated_run(tmp_path / "root"))
    first, second = page.lanes
    assert bars(first)[-1] == ("daily", "failed")
    assert first.bars[-1].reason == "Py4JJavaError: An error occurred while calling o123.save."
    assert first.outcome == "failed" and [m.kind for m in first.marks] == ["exit"]
    assert bars(second) == [
        ("orders", "skipped"),
        ("clean", "invalidated"),
        ("clean", "committed"),
        ("daily", "committed"),
    ]
    assert second.bars[1].reason == "fingerprint changed: version None -> 2"
    # The latest error: the driver's own report (the application's exception) follows its stage's.
    assert (page.failure, page.failure_where) == (["boom"], "attempt 1, as its driver reported it")
    assert [(s.stage, s.seconds) for s in page.savings] == [("orders", 2.0)]  # the stale one saved nothing


def test_a_lost_output_is_shown_lost_and_saves_nothing(tmp_path):
    run = crashed_run(tmp_path / "root")
    run.attempt().skipped("orders", "output lost: part-00000.parquet is missing").end(0)
    page = page_of(run)
    assert bars(page.lanes[1]) == [("orders", "lost")] and page.savings == []
    assert page.lanes[1].story == "Attempt 2 found the output of orders gone, and succeeded."
    assert page.from_zero_s is None  # a resume that saved nothing says nothing of a run from zero


def test_a_stage_failure_without_a_driver_error_is_the_last_failure(tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt().started("orders")
    page = page_of(run.failed("orders", "RuntimeError: disk full\n  at line 3\n  at line 9").end(1))
    assert page.failure == ["orders: RuntimeError: disk full", "  at line 3", "  at line 9"]
    assert page.failure_where == "attempt 1, stage orders"


def test_a_live_run_is_a_running_snapshot(tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").started("clean")
    run.driver.flush()
    run.cli.flush()
    page = page_of(run, lease_live=True)
    assert page.status == "running" and page.lanes[0].outcome == "running"
    assert bars(page.lanes[0]) == [("orders", "committed"), ("clean", "running")]
    assert "running" in page.plan_note and not page.lanes[0].marks
    run.crash()


def test_the_environment_names_spark_the_master_and_the_journal(tmp_path):
    page = page_of(resumed_run(tmp_path / "root"))
    env = dict(page.environment)
    assert env["Spark version"] == "3.5.8" and env["Master"] == "local[2]" and env["Deploy mode"] == "client"
    assert env["Journal"] == str(tmp_path / "root" / "nightly")
    assert env["Application"] == "/jobs/etl.py --day 2026-11-21"


def task_level_run(root) -> SyntheticRun:
    """A write of 4 partitions killed after partitions 0 and 1 committed, resumed keeping them."""
    run = SyntheticRun(root).attempt()
    run.started("numbers")
    run.driver.emit("write.started", stage="numbers", partitions=4, shape="s1", reusable=True, reason=None, kept=[])
    for partition in (0, 1):
        run.driver.emit("task.committed", stage="numbers", partition=partition, task_attempt=0, records=100)
    run.crash()
    run.attempt(plan={"numbers": "continue"})
    run.started("numbers")
    run.driver.emit("write.started", stage="numbers", partitions=4, shape="s1", reusable=True, reason=None, kept=[0, 1])
    for partition, records in ((0, 0), (1, 0), (2, 100), (3, 100)):
        run.driver.emit("task.committed", stage="numbers", partition=partition, task_attempt=0, records=records)
    return run.committed("numbers").end(0)


def test_a_write_that_kept_partitions_has_a_grid_a_continued_bar_and_a_saving(tmp_path):
    page = page_of(task_level_run(tmp_path / "root"))
    (grid,) = page.grids
    assert (grid.kind, grid.name, grid.attempt) == ("write", "numbers", 2)
    assert [(c.index, c.state, c.attempt) for c in grid.cells] == [
        (0, "kept", 1),
        (1, "kept", 1),
        (2, "computed", 2),
        (3, "computed", 2),
    ]
    assert (grid.count("kept"), grid.count("computed"), grid.count("not finished")) == (2, 2, 0)
    assert grid.kept_from == [1]
    (bar,) = page.lanes[1].bars
    assert (bar.outcome, bar.kept, bar.partitions) == ("continued", 2, 4)
    assert bar.reason == "2/4 partitions kept from earlier attempts"
    # Attempt 1's write began one event before partition 0 and committed partition 1 two events
    # after it began: 1.0s of recorded work kept.
    assert [(s.attempt, s.stage, s.seconds, s.how) for s in page.savings] == [(2, "numbers", 1.0, "kept 2 partitions")]
    assert page.lanes[0].bars[0].outcome == "interrupted"


def test_an_unfinished_write_shows_what_it_committed_and_what_is_left(tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.started("numbers")
    run.driver.emit("write.started", stage="numbers", partitions=3, shape="s1", reusable=False, reason="INDETERMINATE")
    run.driver.emit("task.committed", stage="numbers", partition=1, task_attempt=0, records=5)
    run.crash()
    (grid,) = fold_grids(read_journal(run.dir))
    assert [c.state for c in grid.cells] == ["not finished", "computed", "not finished"]
    assert grid.reason == "INDETERMINATE"


def test_a_finished_write_that_kept_nothing_has_no_grid(tmp_path):
    assert fold_grids(read_journal(resumed_run(tmp_path / "root").dir)) == []


def kept_maps(*indexes: int) -> list[dict]:
    return [
        {
            "map": i,
            "path": f"s-1/map-{i}",
            "data_bytes": 10,
            "index_bytes": 24,
            "records": 1,
            "row_bytes": 8,
            "keep_us": 2000,
            "copy_us": 250_000,
        }
        for i in indexes
    ]


def test_shuffle_map_outputs_kept_across_attempts_have_a_grid(tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-1", maps=4, reduces=2, reused=0)
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-1", maps=kept_maps(0, 2))
    run.crash()
    run.attempt().started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-1", maps=4, reduces=2, reused=2)
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-1", maps=kept_maps(1))
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-1", maps=kept_maps(3))
    run.committed("daily").end(0)
    (grid,) = fold_grids(read_journal(run.dir))
    assert (grid.kind, grid.name, grid.stage) == ("shuffle", "s-1", "daily")
    assert [(c.state, c.attempt) for c in grid.cells] == [("kept", 1), ("computed", 2), ("kept", 1), ("computed", 2)]
    # What keeping them cost, over the four copies made.
    assert grid.cost == "136 B kept; 8 ms on map tasks' threads, 1.0 s of background copying"


def test_shuffle_outputs_all_kept_by_a_later_attempt_still_show(tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-1", maps=2, reduces=2, reused=0)
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-1", maps=kept_maps(0, 1))
    run.crash()
    run.attempt().started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-1", maps=2, reduces=2, reused=2)
    run.committed("daily").end(0)
    (grid,) = fold_grids(read_journal(run.dir))
    assert [c.state for c in grid.cells] == ["kept", "kept"] and grid.attempt == 2


def test_a_shuffle_the_resume_planned_under_another_identity_shows_nothing_kept(tmp_path):
    """The plan offered attempt 1's map outputs; attempt 2 planned the shuffle under a new identity
    and computed every map task again. Nothing of it is drawn kept, and nothing of it saved time."""
    run = SyntheticRun(tmp_path / "root").attempt()
    run.started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-1", maps=2, reduces=2, reused=0)
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-1", maps=kept_maps(0, 1))
    run.crash()
    run.attempt(plan={"daily": "run"}).started("daily")
    run.driver.emit("shuffle.registered", stage="daily", shuffle="s-2", maps=2, reduces=2, reused=0)
    run.driver.emit("shuffle.committed", stage="daily", shuffle="s-2", maps=kept_maps(0, 1))
    run.committed("daily").end(0)
    assert fold_grids(read_journal(run.dir)) == []
    page = page_of(run)
    assert page.savings == [] and page.saved_s == 0
    assert page.saved.startswith("recovery saved nothing")


def test_the_report_and_the_commands_summary_say_the_same_time_saved(tmp_path):
    run = task_level_run(tmp_path / "root")
    page = page_of(run)
    document = summary.command_summary(RunState.from_events(run.run_id, read_journal(run.dir)), 2, 0)
    assert page.saved_s == document["saved_s"] == 1.0
    assert (
        page.saved
        == document["saved"]
        == ("recovery saved about 1.0s of work done by earlier attempts (2 partitions kept)")
    )
