"""A write after a shuffle, end to end (real spark-submit, real SIGKILL, adaptive execution on):
its map stages run once under ``submit``, and a killed write keeps its committed post-shuffle
partitions unless Spark calls them INDETERMINATE or adaptive execution chose other partitions."""

from __future__ import annotations

import collections
import os
import subprocess
import time

import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import (
    FLUSH_OFTEN,
    SHUFFLE_WRITE,
    SHUFFLING,
    Hold,
    commits_reach,
    computed,
    planned,
    run_and_kill,
    side_by_side,
    submit_command,
)
from tests.helpers import events_of, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e
MAPS, WRITES = 6, 8
UNSLOWED = {**os.environ, "SHUFFLE_WRITE_SLEEP": "0"}  # a resume, never killed, need not sleep


def expected_etl() -> collections.Counter:
    """What the ``etl`` shape writes, computed here: the join keeps every id (k = id % 50 always
    matches), the aggregation groups by id % (WRITES * 5)."""
    groups: dict[int, list[int]] = {}
    for i in range(MAPS * 100):
        sums = groups.setdefault(i % (WRITES * 5), [0, 0])
        sums[0] += i
        sums[1] += (i % 50) * 7
    return collections.Counter((g, s, t, 1) for g, (s, t) in groups.items())


def written(spark, out: str) -> collections.Counter:
    return collections.Counter(tuple(row) for row in spark.read.parquet(out).select("g", "s", "t", "x").collect())


SHAPES = ["join", "agg", "sort", "repcol"]


@pytest.fixture(scope="module")
def shapes_run(tmp_path_factory):
    """Every shape written by one application under plain spark-submit and one under
    ``submit``, side by side; returns the folder of each (its markers/<shape> count partitions)."""
    folder = tmp_path_factory.mktemp("shapes")

    def launch(how: str) -> str:
        out, markers = str(folder / how / "out"), str(folder / how / "markers")
        args = [*SHUFFLING, SHUFFLE_WRITE, out, markers, ",".join(SHAPES), str(MAPS), str(WRITES)]
        if how == "plain":
            command = [find_spark_submit(), *args]
        else:
            command = sparkrecover_command("submit", "--root", str(folder / "root"), "--run-id", "night", "--", *args)
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=UNSLOWED)
        assert result.returncode == 0, result.stderr[-3000:]
        return markers

    plain, submitted = side_by_side(lambda: launch("plain"), lambda: launch("submit"))
    return {"plain": plain, "submit": submitted}


@pytest.mark.parametrize("shape", SHAPES)
def test_submit_computes_exactly_the_partitions_plain_spark_submit_computes(shapes_run, shape):
    counts = {
        how: (computed(os.path.join(markers, shape), "map"), computed(os.path.join(markers, shape), "write"))
        for how, markers in shapes_run.items()
    }
    assert counts["submit"] == counts["plain"]
    assert len(counts["plain"][0]) >= MAPS  # every map partition at least once (a sort samples first)


def submit_shape_and_kill(tmp_path, shape: str, commits: int) -> int:
    """Submit ``shape``, its write tasks from partition ``commits`` on held, and SIGKILL it once
    ``commits`` partitions committed; returns the time of the kill (ns)."""
    root = str(tmp_path / "root")
    app_args = [str(tmp_path / "out"), str(tmp_path / "markers"), shape, str(MAPS), str(WRITES)]
    command = submit_command(
        root, "night", SHUFFLE_WRITE, *app_args, spark_options=SHUFFLING, submit_options=FLUSH_OFTEN
    )
    held = Hold(tmp_path).env(commits, SHUFFLE_WRITE_SLEEP="0")
    reached = commits_reach(os.path.join(root, "night"), 1, commits)
    return run_and_kill(command, reached, f"{commits} task commits", env=held)


def test_a_killed_write_after_a_join_and_an_aggregation_keeps_its_committed_partitions(spark, tmp_path):
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    killed_at = submit_shape_and_kill(tmp_path, "etl", commits=4)
    stage = planned(root)
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert kept == 4 and stage["partitions"]["total"] == WRITES
    assert stage["reason"].startswith(f"{kept}/{WRITES} partitions kept")

    # Counted from the resume's start: a Python worker of the killed application may still mark a
    # task whose rows its JVM had sent just before the kill.
    resume_started = time.time_ns()
    resumed = run_cli("resume", "night", "--root", root, env=UNSLOWED)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert killed_at < resume_started
    # Kept ones were not computed (a task Spark retried in the resume marks its partition twice).
    assert len(set(computed(markers, "write", resume_started))) == WRITES - kept
    assert written(spark, out) == expected_etl()
    started = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"]
    assert [(e["attempt"], len(e["kept"])) for e in started] == [(1, 0), (2, kept)]
    # The specs adaptive execution chose, journaled: two shuffles read (the join's sides are one
    # stage's input; the aggregation's output is the write's), the same in both attempts.
    assert started[0]["specs"] == started[1]["specs"] and started[0]["partition_specs"][-1] == " ".join(
        str(p) for p in range(WRITES)
    )


def test_an_indeterminate_write_after_a_shuffle_reruns_whole_and_exact(spark, tmp_path):
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    killed_at = submit_shape_and_kill(tmp_path, "indeterminate", commits=4)
    stage = planned(root)
    assert stage["decision"] == "run" and "INDETERMINATE" in stage["reason"], stage
    resumed = run_cli("resume", "night", "--root", root, env=UNSLOWED)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed(markers, "write", killed_at)) == WRITES
    assert written(spark, out) == expected_etl()


def test_other_partition_specs_from_adaptive_execution_keep_nothing_and_say_why(spark, tmp_path):
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    killed_at = submit_shape_and_kill(tmp_path, "etl", commits=4)
    assert planned(root)["decision"] == "continue"
    # Coalescing on: adaptive execution merges the small reducers into fewer partitions.
    env = {**UNSLOWED, "ADVISORY": "64m"}
    resumed = run_cli("resume", "night", "--root", root, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    started = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"]
    assert started[-1]["kept"] == [] and "post-shuffle partitions differ" in started[-1]["reason"]
    assert started[-1]["partitions"] < WRITES and computed(markers, "write", killed_at)
    assert written(spark, out) == expected_etl()
