"""The listener end to end under submit: the JVM listener by default, the Py4J one when the jar is hidden."""

from __future__ import annotations

import os

import orjson
import pytest

from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from tests.helpers import run_cli, summary_counts

pytestmark = pytest.mark.e2e


# -- end to end: real spark-submit ----------------------------------------------------------------

FLAKY_APP = """
import json, sys
from pyspark import TaskContext
from pyspark.sql import SparkSession
import sparkrecover as sr

spark = SparkSession.builder.getOrCreate()
sc = spark.sparkContext

def flaky(index, rows):
    if index == 1 and TaskContext.get().attemptNumber() == 0:
        raise RuntimeError("deliberate failure of a first attempt")
    return rows

sr.checkpoint("flaky", lambda: spark.createDataFrame(
    sc.parallelize(range(100), 4).mapPartitionsWithIndex(flaky).map(lambda x: (x,)), "x long"))
sc._jsc.sc().listenerBus().waitUntilEmpty(60000)
tracker = sc.statusTracker()
stages = {}
for job in tracker.getJobIdsForGroup(None):
    for stage in tracker.getJobInfo(job).stageIds:
        info = tracker.getStageInfo(stage)
        if info is not None:
            stages[stage] = {"tasks": info.numTasks, "completed_tasks": info.numCompletedTasks,
                             "failed_tasks": info.numFailedTasks}
json.dump(stages, open(sys.argv[1], "w"))
spark.stop()
"""
# local[2,2]: two threads, and a failed task is tried again once (plain local[2] never retries).
FLAKY_OPTIONS = [
    "--master",
    "local[2,2]",
    "--conf",
    "spark.ui.enabled=false",
    "--conf",
    "spark.sql.shuffle.partitions=2",
]


def submit_flaky(tmp_path, env=None) -> tuple[object, list[dict], dict]:
    app = tmp_path / "flaky.py"
    app.write_text(FLAKY_APP)
    root, tracked = str(tmp_path / "root"), str(tmp_path / "tracker.json")
    result = run_cli(
        "submit",
        "--root",
        root,
        "--run-id",
        "flaky",
        "--",
        *FLAKY_OPTIONS,
        "--conf",
        "spark.extraListeners=org.apache.spark.scheduler.StatsReportListener",
        str(app),
        tracked,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tracked, "rb") as handle:
        tracker = {int(stage): counts for stage, counts in orjson.loads(handle.read()).items()}
    return result, read_journal(os.path.join(root, "flaky")), tracker


def of_type(records: list[dict], event_type: str) -> list[dict]:
    return [r for r in records if r["type"] == event_type]


@pytest.mark.e2e
def test_submit_uses_the_jvm_listener_and_its_counts_match_spark(tmp_path):
    result, records, tracker = submit_flaky(tmp_path)
    command = of_type(records, ev.ATTEMPT_STARTED)[0]["command"]
    jar = command[command.index("--jars") + 1]
    assert jar.startswith(os.environ["SPARKRECOVER_CACHE"]) and os.path.isfile(jar)
    assert (
        "spark.extraListeners=org.apache.spark.scheduler.StatsReportListener,sparkrecover.jvm.bridge.SparkRecoverListener"
    ) in command
    assert of_type(records, ev.DRIVER_STARTED)[0]["listener"] == "jvm"
    ended = of_type(records, ev.DRIVER_ENDED)[0]
    assert (ended["listener"], ended["spark_events_dropped"]) == ("jvm", 0)
    assert "Py4J" not in result.stderr

    flaky = [r for r in of_type(records, ev.SPARK_STAGE_COMPLETED) if r["stage"] == "flaky"]
    assert flaky, "no Spark stage attributed to the pipeline stage"
    for record in flaky:
        assert summary_counts(record) == tracker[record["spark_stage"]]
    assert sum(r["failed_tasks"] for r in flaky) == 1  # the first attempt failed, the retry won
    assert all(r["completed_tasks"] == r["tasks"] and r["failure"] is None for r in flaky)
    jobs = [r["job"] for r in of_type(records, ev.SPARK_JOB_STARTED) if r["stage"] == "flaky"]
    (committed,) = of_type(records, ev.STAGE_COMMITTED)
    assert jobs and committed["spark_jobs"] == jobs
    last_spark_event = max(r["seq"] for r in records if r["type"].startswith("spark.") and r["stage"] == "flaky")
    assert last_spark_event < committed["seq"]  # drained before the commit was written


@pytest.mark.e2e
def test_without_the_jar_the_py4j_listener_takes_over_and_says_so_once(tmp_path):
    env = {**os.environ, "SPARKRECOVER_NO_JVM_LISTENER": "1"}
    result, records, tracker = submit_flaky(tmp_path, env=env)
    assert result.stderr.count("Py4J listener") == 1
    assert "SPARKRECOVER_NO_JVM_LISTENER" in result.stderr
    command = of_type(records, ev.ATTEMPT_STARTED)[0]["command"]
    assert "--jars" not in command and "sparkrecover.jvm.bridge.SparkRecoverListener" not in " ".join(command)
    assert of_type(records, ev.DRIVER_STARTED)[0]["listener"] == "py4j"
    ended = of_type(records, ev.DRIVER_ENDED)[0]
    assert (ended["listener"], ended["spark_events_dropped"]) == ("py4j", 0)
    flaky = [r for r in of_type(records, ev.SPARK_STAGE_COMPLETED) if r["stage"] == "flaky"]
    assert flaky and sum(r["failed_tasks"] for r in flaky) == 1
    assert all(r["tasks"] == tracker[r["spark_stage"]]["tasks"] for r in flaky)
    assert {r["stage"] for r in of_type(records, ev.SPARK_JOB_STARTED)} == {"flaky"}
