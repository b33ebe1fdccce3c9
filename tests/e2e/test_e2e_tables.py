"""Tables end to end: an unmodified script that saves tables, changes them
with SQL and drops them is SIGKILLed, resumed, and leaves what a plain run leaves; the next plain
run of the script in the same folder works."""

from __future__ import annotations

import glob
import json
import os
import subprocess

import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import APPS, resume_and_kill, submit_and_kill
from tests.helpers import SPARK_OPTIONS, events_of, implicit_stage, run_cli
from tests.references import FOLDER, plain_env

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "table_app.py")


def lines(folder: str) -> list[str]:
    found = []
    for name in sorted(glob.glob(os.path.join(folder, "part-*"))):
        found += open(name).read().splitlines()
    return sorted(found)


def plain_run(folder) -> subprocess.CompletedProcess:
    return subprocess.run(
        [find_spark_submit(), *SPARK_OPTIONS, APP, str(folder / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        env=plain_env(),
        cwd=folder,
    )


@pytest.fixture
def uninterrupted(plain_runs):
    """The app under plain spark-submit (beside the test's killed run): once done, its outputs,
    and an empty warehouse after it."""
    plain = plain_runs.start(APP, f"{FOLDER}/out")

    def outputs() -> tuple[list[str], list[str]]:
        assert "tables: []" in plain.wait().stdout
        assert os.listdir(plain.path("spark-warehouse")) == []
        return lines(plain.path("out", "report")), lines(plain.path("out", "t3"))

    return outputs


def test_killed_after_a_table_step_resumes_to_what_a_plain_run_leaves(tmp_path, uninterrupted):
    """Two kill points of the table steps, each resumed, on one run (each would need its own killed
    run and plain references): killed after an SQL INSERT INTO a saved table (row 4), then its
    resume killed after a saved table the script later drops (row 6)."""
    work = tmp_path / "work"
    work.mkdir()
    out, root = str(work / "out"), str(tmp_path / "root")
    row4 = implicit_stage(APP, "INSERT INTO t2", "append", "table t2")
    row6 = implicit_stage(APP, 'saveAsTable("t3")', "errorifexists", "table t3")
    run_dir = submit_and_kill(root, "tables", [out], after_stage=row4, cwd=str(work), app=APP)
    assert not os.path.exists(os.path.join(out, "t3"))
    report, copy = uninterrupted()
    assert [line.split(",")[1] for line in report] == ["13", "13", "14"]  # t2 after overwrite + insert

    # Row 4: resumed after the INSERT INTO t2, spark.table("t2") works and holds each row once
    # (the report is written by this attempt, killed once t3 is saved).
    resume_and_kill(root, "tables", "stage.committed", row6, attempt=2)
    assert not os.path.exists(os.path.join(out, "t3"))
    assert lines(os.path.join(out, "report")) == report
    second = [
        e["stage"].split(" ", 1)[1] for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] == "stage.skipped"
    ]
    assert second == ["errorifexists table t2", "overwrite table t2", "append table t2"]

    # Row 6: resumed after the saved table t3 (later dropped).
    result = run_cli("resume", "tables", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert lines(os.path.join(out, "report")) == report  # spark.table("t2") worked, each row once
    assert lines(os.path.join(out, "t3")) == copy
    # The skipped saveAsTable registered MANAGED tables: the script's DROPs removed their files.
    assert os.listdir(work / "spark-warehouse") == []
    third = [e for e in events_of(run_dir) if e["attempt"] == 3 and e["type"] == "stage.skipped"]
    skipped = [e["stage"].split(" ", 1)[1] for e in third]
    assert skipped == [*second, f"overwrite {out}/report", "errorifexists table t3"]

    inspect = run_cli("inspect", "tables", "--root", root, "--json")
    assert inspect.returncode == 0, inspect.stderr[-3000:]
    statuses = {stage["stage"].split(" ", 1)[1]: stage["status"] for stage in json.loads(inspect.stdout)["stages"]}
    assert "lost" not in statuses.values(), statuses
    assert statuses["drop table t3"] == statuses["drop table t2"] == "committed"

    again = plain_run(work)  # the next plain run of the script in the same folder
    assert again.returncode == 0, again.stderr[-3000:]
    assert lines(os.path.join(out, "report")) == report
