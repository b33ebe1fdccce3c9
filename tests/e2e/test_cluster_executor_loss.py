"""An executor lost after the map stage, while the write runs, then the driver, then ``resume``
(docs/shuffles.md, "An executor lost while the application runs" and "An executor lost"): on the
two-worker standalone cluster. With the root on S3, the running application serves the lost
executor's map outputs from their copies (no map task runs again) and the resume runs none. In a
shared local folder (``--keep-shuffles copy``) with serving switched off (Spark's own shuffle
storage plugin named), Spark runs the lost executor's map tasks again in a second attempt of the
map stage, and every copy either attempt kept is reused by the resume. The moments are made, not
waited for by luck: the write's tasks from partition ``HOLD`` on hold until the test releases them
(tests/apps/shuffle_write.py), so the executor dies with the map stage done and the write in
flight, and the driver once the loss is dealt with (served, or the map stage's second attempt
journaled)."""

from __future__ import annotations

import os
import signal

import pytest

from sparkrecover.journal import read_journal
from tests.e2e import test_cluster_shuffle
from tests.e2e.support import Hold, kill_tree, map_tasks, needs_s3a, s3a_options
from tests.e2e.test_cluster_shuffle import MAPS, Job, expected, output
from tests.helpers import run_cli, spark_events

pytestmark = pytest.mark.e2e
cluster = test_cluster_shuffle.cluster  # the same two-worker cluster fixture, one per module
HOLD = 2  # write partitions 0 and 1 commit; from 2 on, tasks hold until the test releases them
SPARK_STORAGE = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"


def spark_4() -> bool:
    import pyspark

    return int(pyspark.__version__.split(".")[0]) >= 4


def events_options(logs: str) -> list[str]:
    return ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={logs}",
            "--conf", "spark.eventLog.compress=false"]  # fmt: skip


def journaled_maps(job: Job) -> int:
    """Map outputs journaled as kept, over every shuffle and stage attempt."""
    return sum(len(e["maps"]) for e in read_journal(job.run_dir) if e["type"] == "shuffle.committed")


def last_map_stage_ran_again(job: Job) -> bool:
    """A second attempt of a map stage completed: the write's parent map stage, which Spark runs
    again last (adaptive execution reruns the upstream shuffles' lost outputs as new stages)."""
    return any(
        e["type"] == "spark.stage.completed" and e.get("spark_attempt", 0) >= 1 and not e.get("failure")
        for e in read_journal(job.run_dir)
    )


def first_app(job: Job) -> str:
    (app,) = [e["app_id"] for e in read_journal(job.run_dir) if e["type"] == "driver.started" and e["attempt"] == 1]
    return app


def finished_map_tasks(logs, app_id: str) -> int:
    """Map tasks that succeeded in an application, from Spark's own event log."""
    ended = spark_events(str(logs), app_id, "SparkListenerTaskEnd")
    return sum(e["Task Type"] == "ShuffleMapTask" and e["Task End Reason"]["Reason"] == "Success" for e in ended)


@pytest.mark.parametrize(("store", "serving"), [("shared", False), pytest.param("s3", True, marks=needs_s3a)])
def test_an_executor_lost_in_the_write_then_the_driver_the_resume_computes_no_map_task(
    tmp_path, cluster, spark, request, store, serving
):
    logs = tmp_path / "events"
    logs.mkdir()
    hold = Hold(tmp_path)
    options = events_options(str(logs))
    if not serving:  # the application's own storage plugin: Spark drops the lost executor's outputs
        options += ["--conf", f"spark.shuffle.sort.io.plugin.class={SPARK_STORAGE}"]
    if store == "s3":
        s3 = request.getfixturevalue("s3")
        credentials = [f"spark.executorEnv.{key}={value}" for key, value in s3.env().items()]
        credentials = [item for conf in credentials for item in ("--conf", conf)]
        job = Job(cluster, tmp_path, s3.prefix + "/runs", [*options, *s3a_options(s3.endpoint)],
                  {**s3.env(), **hold.env(HOLD, base={})}, credentials)  # fmt: skip
        # auto on S3; on a Spark 3.5 cluster auto keeps nothing (its executors need the jar on their
        # class path, which copy adds), as test_a_run_rooted_on_s3_keeps_map_outputs_there_across_kills says.
        first = job.submit(*(() if spark_4() else ("--keep-shuffles", "copy")))
    else:
        job = Job(cluster, tmp_path, str(tmp_path / "root"), options, hold.env(HOLD, base={}), [])
        first = job.submit("--keep-shuffles", "copy")
    lost: list[int] = []

    def map_stage_kept_and_write_held() -> bool:
        # The join's and the aggregation's map outputs journaled (8 + 2 + 8), the write holding.
        if journaled_maps(job) >= MAPS + 2 + MAPS and len(job.marked("write")) >= HOLD + 2:
            lost.extend(cluster.executors(1))
            return bool(lost)
        return False

    try:
        job.wait(first, map_stage_kept_and_write_held)
        for pid in lost:
            os.kill(pid, signal.SIGKILL)
        before = len(job.marked("map"))

        def served() -> bool:
            return any(e["type"] == "shuffle.served" for e in read_journal(job.run_dir))

        def map_stage_ran_again_and_journaled() -> bool:
            # The reruns' copies journaled, and their task ends in Spark's event log (flushed at
            # each stage's end, on a queue of its own), which the test counts them from below.
            if not last_map_stage_ran_again(job):
                return False
            again = sum(loss.map_tasks_again for loss in job.state().lost_executors.losses)
            journaled = journaled_maps(job) >= MAPS + 2 + MAPS + again
            return journaled and finished_map_tasks(logs, first_app(job)) >= MAPS + 2 + MAPS + again

        job.wait(first, served if serving else map_stage_ran_again_and_journaled)
    except AssertionError:
        kill_tree(first.pid)
        raise
    killed = job.until(first, lambda: True)
    if serving:
        assert len(job.marked("map")) == before  # served from their copies
    else:
        assert len(job.marked("map")) > before  # the lost executor's map outputs were computed again

    # The plan keeps every whole copy, whichever attempt of the map stage wrote it.
    plan = run_cli("resume", "night", "--root", job.root, "--dry-run", "--json", env=job.env)
    assert plan.returncode == 0, plan.stderr
    assert _kept_all(plan.stdout), plan.stdout

    hold.release()
    job.finish(job.resume())
    journal = read_journal(job.run_dir)
    (started,) = [e for e in journal if e["type"] == "driver.started" and e["attempt"] == 2]
    assert map_tasks(str(logs), started["app_id"]) == 0
    assert job.marked("map", killed) == []
    assert output(spark, job.out) == expected()

    (loss,) = [e for e in journal if e["type"] == "executor.lost"]
    assert loss["executor"] and loss["host"] and loss["reason"]
    # What it cost, as the views count it: the map tasks Spark's event log has the first application
    # finish beyond one run of each map stage (8 + 2 + 8).
    (counted,) = job.state().lost_executors.losses
    assert counted.map_tasks_again == finished_map_tasks(logs, first_app(job)) - (MAPS + 2 + MAPS)
    assert (counted.map_tasks_again == 0 and counted.served > 0) if serving else counted.map_tasks_again > 0
    shown = run_cli("inspect", "night", "--root", job.root, env=job.env)
    assert "executor" in shown.stdout and "lost" in shown.stdout, shown.stdout


def _kept_all(printed: str) -> bool:
    import json

    document = json.loads(printed)
    counts = [stage["shuffle_maps"] for stage in document["stages"] if stage.get("shuffle_maps")]
    return bool(counts) and all(c["kept"] == c["total"] for c in counts) and document["shuffles_not_kept"] == []
