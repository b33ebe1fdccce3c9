"""``inspect``, ``replay`` and ``report`` show an executor lost and what it cost (synthetic
journals, no Spark)."""

from __future__ import annotations

from tests.journals import SyntheticRun

LINE = "attempt 1: executor 3 on 10.0.0.7 lost (Command exited with code 137): 4 map tasks run again"


def lost_run(root) -> SyntheticRun:
    run = SyntheticRun(root).attempt()
    run.started("daily")
    stage = {"stage": "daily", "failed_tasks": 0, "killed_tasks": 0}
    run.driver.emit("spark.stage.completed", spark_stage=0, spark_attempt=0, tasks=8, completed_tasks=8,
                    spark_shuffle=0, **stage)  # fmt: skip
    run.driver.emit("executor.lost", executor="3", host="10.0.0.7", reason="Command exited with code 137")
    run.driver.emit("spark.stage.completed", spark_stage=0, spark_attempt=1, tasks=4, completed_tasks=4,
                    spark_shuffle=0, **stage)  # fmt: skip
    return run.crash()


def test_inspect_says_which_executor_was_lost_and_what_it_cost(cli, tmp_path):
    lost_run(tmp_path / "root")
    code, out, err = cli("inspect", "nightly", "--root", str(tmp_path / "root"))
    assert code == 0, err
    assert LINE in out.replace("\n", " ").replace("  ", " ")


def test_replay_shows_the_loss_as_it_happened_and_its_cost_at_the_end(cli, tmp_path):
    lost_run(tmp_path / "root")
    code, out, err = cli("replay", "nightly", "--root", str(tmp_path / "root"))
    assert code == 0, err
    assert "executor 3 on 10.0.0.7 lost: Command exited with code 137" in out
    assert "Spark stage 0.1: 4 tasks (map stage of Spark shuffle 0)" in out
    assert LINE in (out + err).replace("\n", " ").replace("  ", " ")


def test_the_report_page_says_it(cli, tmp_path):
    lost_run(tmp_path / "root")
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    assert code == 0, err
    assert f"<li>{LINE}</li>" in out


def test_the_plan_says_why_a_shuffle_outside_any_stage_keeps_nothing(cli, tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.driver.emit("shuffle.unsupported", reason="the map stage is INDETERMINATE", stage=None, spark_shuffle=3)
    run.crash()
    code, out, err = cli("resume", "nightly", "--root", str(tmp_path / "root"), "--dry-run")
    assert code == 0, err
    assert "map outputs outside any stage: Spark shuffle 3: not kept: the map stage is INDETERMINATE" in out
