"""An executor lost after the map stage, while the write runs, then the driver, then ``resume``
(docs/shuffles.md, "An executor lost"): on the two-worker standalone cluster with a shared local
root (``--keep-shuffles copy``), Spark runs the lost executor's map tasks again in a second
attempt of the map stage, and every copy either attempt kept is reused by the resume. The moments
are made, not waited for by luck: the write's tasks from partition ``HOLD`` on hold until the test
releases them (tests/apps/shuffle_write.py), so the executor dies with the map stage done and the
write in flight, and the driver once the map stage's second attempt is journaled."""

from __future__ import annotations

import os
import signal

import pytest

from sparkrecover.journal import read_journal
from tests.e2e.support import Hold, kill_tree, map_tasks, needs_s3a, s3a_options
from tests.e2e.test_cluster_shuffle import MAPS, Job, cluster, expected, output  # noqa: F401 (a fixture)
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e
HOLD = 2  # write partitions 0 and 1 commit; from 2 on, tasks hold until the test releases them


def events_options(logs: str) -> list[str]:
    return ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={logs}",
            "--conf", "spark.eventLog.compress=false"]  # fmt: skip


def journaled_maps(job: Job) -> int:
    """Map outputs journaled as kept, over every shuffle and stage attempt."""
    return sum(len(e["maps"]) for e in read_journal(job.run_dir) if e["type"] == "shuffle.committed")


def map_stage_retries_done(job: Job) -> int | None:
    """The map tasks Spark's second attempts of map stages completed, once one has completed
    (only map stages complete in a second attempt here: the write's holds); else None."""
    again = [
        e for e in read_journal(job.run_dir)
        if e["type"] == "spark.stage.completed" and e.get("spark_attempt", 0) >= 1 and not e.get("failure")
    ]  # fmt: skip
    return sum(e["completed_tasks"] for e in again) if again else None


@pytest.mark.parametrize("store", ["shared", pytest.param("s3", marks=needs_s3a)])
def test_an_executor_lost_in_the_write_then_the_driver_the_resume_computes_no_map_task(
    tmp_path, cluster, spark, request, store
):
    logs = tmp_path / "events"
    logs.mkdir()
    hold = Hold(tmp_path)
    options = events_options(str(logs))
    if store == "s3":
        s3 = request.getfixturevalue("s3")
        credentials = [f"spark.executorEnv.{key}={value}" for key, value in s3.env().items()]
        credentials = [item for conf in credentials for item in ("--conf", conf)]
        job = Job(cluster, tmp_path, s3.prefix + "/runs", [*options, *s3a_options(s3.endpoint)],
                  {**s3.env(), **hold.env(HOLD, base={})}, credentials)  # fmt: skip
        first = job.submit()
    else:
        job = Job(cluster, tmp_path, str(tmp_path / "root"), options, hold.env(HOLD, base={}), [])
        first = job.submit("--keep-shuffles", "copy")
    lost: list[int] = []

    def map_stage_kept_and_write_held() -> bool:
        # Both shuffles' map outputs journaled (8 + the small side's 2), the write's tasks holding.
        if journaled_maps(job) >= MAPS + 2 and len(job.marked("write")) >= HOLD + 2:
            lost.extend(cluster.executors(1))
            return bool(lost)
        return False

    try:
        job.wait(first, map_stage_kept_and_write_held)
        for pid in lost:
            os.kill(pid, signal.SIGKILL)
        before = len(job.marked("map"))

        def map_stage_ran_again_and_journaled() -> bool:
            again = map_stage_retries_done(job)
            return again is not None and again > 0 and journaled_maps(job) >= MAPS + 2 + again

        job.wait(first, map_stage_ran_again_and_journaled)
    except AssertionError:
        kill_tree(first.pid)
        raise
    killed = job.until(first, lambda: True)
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
    shown = run_cli("inspect", "night", "--root", job.root, env=job.env)
    assert "executor" in shown.stdout and "lost" in shown.stdout, shown.stdout


def _kept_all(printed: str) -> bool:
    import json

    document = json.loads(printed)
    counts = [stage["shuffle_maps"] for stage in document["stages"] if stage.get("shuffle_maps")]
    return bool(counts) and all(c["kept"] == c["total"] for c in counts)
