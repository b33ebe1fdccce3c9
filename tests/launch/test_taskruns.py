"""The run a scheduler's task instance runs as (launch/taskruns.py): the same for every try, its
own for every DAG run, and a new generation only when recompute asks for a finished one."""

from __future__ import annotations

import pytest

from sparkrecover.launch import taskruns
from sparkrecover.rundir import runs
from tests.journals import SyntheticRun


def test_a_task_instance_is_named_by_its_dag_its_dag_run_and_its_task():
    assert taskruns.task_run_id("nightly_etl", "first", "etl") == "nightly_etl.first.etl"
    assert taskruns.task_run_id("nightly_etl", "first", "etl", map_index=3) == "nightly_etl.first.etl.m3"


def test_airflows_run_ids_become_valid_run_ids_and_two_dag_runs_never_share_one():
    """A manual run at 18:30 and the scheduled run of the same logical date are two runs."""
    scheduled = taskruns.task_run_id("nightly_etl", "scheduled__2026-11-21T00:00:00+00:00", "etl")
    manual = taskruns.task_run_id("nightly_etl", "manual__2026-11-21T18:30:00+00:00", "etl")
    # Characters a run id cannot hold are dropped for '-', and a digest of the exact ids keeps
    # ids that read alike apart.
    odd = taskruns.task_run_id("nightly_etl", "manual__2026-11-21T18-30-00-00-00", "etl")
    for run_id in (scheduled, manual, odd):
        assert runs.check_run_id(run_id) == run_id
    assert len({scheduled, manual, odd}) == 3
    assert manual.startswith("nightly_etl.manual__2026-11-21T18-30-00-00-00.etl-")
    # The same ids, the same run: every try of one task instance.
    assert taskruns.task_run_id("nightly_etl", "manual__2026-11-21T18:30:00+00:00", "etl") == manual


def test_long_ids_are_cut_to_a_valid_run_id_with_room_for_a_generation():
    run_id = taskruns.task_run_id("d" * 200, "r" * 200, "t" * 200)
    assert runs.check_run_id(taskruns.generation(run_id, 99))


def test_without_recompute_every_try_runs_as_the_task_instances_run(tmp_path):
    root = str(tmp_path / "root")
    SyntheticRun(root, "nightly_etl.first.etl").attempt().done("etl").end(0)
    assert taskruns.run_for_try(root, "nightly_etl.first.etl", recompute=False) == ("nightly_etl.first.etl", None)


def test_recompute_starts_a_new_generation_of_a_succeeded_run_and_resumes_an_unfinished_one(tmp_path):
    root = str(tmp_path / "root")
    base = "nightly_etl.first.etl"
    assert taskruns.run_for_try(root, base, recompute=True) == (base, None)  # nothing yet: the run itself
    SyntheticRun(root, base).attempt().done("etl").end(0)
    run_id, said = taskruns.run_for_try(root, base, recompute=True)
    assert run_id == base + ".r2"
    assert said == f"run {base} succeeded; recompute=True: this try computes it again as run {base}.r2"
    # The second generation crashed: the next try resumes it rather than start a third.
    SyntheticRun(root, base + ".r2").attempt().started("etl").crash()
    assert taskruns.run_for_try(root, base, recompute=True) == (base + ".r2", None)


def test_the_options_that_shape_the_line_are_the_connections_and_the_users():
    assert taskruns.submit_options(
        master="yarn", deploy_mode="cluster", conf={"spark.executor.memory": "4g"}, jars="a.jar,b.jar",
        py_files=None, files="f.txt",
    ) == [
        "--master", "yarn", "--deploy-mode", "cluster", "--conf", "spark.executor.memory=4g",
        "--jars", "a.jar,b.jar", "--files", "f.txt",
    ]  # fmt: skip


@pytest.mark.parametrize(("given", "meant"), [(True, True), ("True", True), ("false", False), ("", False), (0, False)])
def test_a_templated_flag_reads_as_its_text_says(given, meant):
    assert taskruns.truthy(given) is meant
