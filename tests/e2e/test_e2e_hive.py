"""Hive support end to end: an unmodified script with
``enableHiveSupport()`` and the embedded Derby metastore in the driver's folder, SIGKILLed after
its SQL writes, resumed. The metastore survives the driver, so the tables are there on resume:
a CREATE TABLE AS that ran must be skipped (not fail TABLE_OR_VIEW_ALREADY_EXISTS), an INSERT
INTO that ran must not insert again, and nothing is registered a second time."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import APPS, submit_and_kill
from tests.helpers import SPARK_OPTIONS, events_of, implicit_stage, run_cli
from tests.references import plain_env

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "hive_app.py")
EXPECTED = ["events,400,400", "legacy,100,100"]  # what the plain run below writes


def report(out: str) -> list[str]:
    lines = []
    for name in sorted(glob.glob(os.path.join(out, "report", "part-*"))):
        lines += open(name).read().splitlines()
    return lines


def test_killed_after_sql_writes_with_hive_support_resumes_each_row_once(tmp_path):
    plain, work = tmp_path / "plain", tmp_path / "work"
    plain.mkdir()
    work.mkdir()
    # The uninterrupted plain run goes on beside the one that is killed (each has its own folder,
    # metastore and warehouse): the Derby metastore's start makes each run slow.
    log = plain / "spark-submit.log"  # a file, not a pipe: nobody reads a pipe until the kill is done
    with open(log, "wb") as handle:
        uninterrupted = subprocess.Popen(
            [find_spark_submit(), *SPARK_OPTIONS, APP, str(plain / "out")],
            stdout=subprocess.DEVNULL,
            stderr=handle,
            env=plain_env(),
            cwd=plain,
        )
    out, root = str(work / "out"), str(tmp_path / "root")
    insert = implicit_stage(APP, "INSERT INTO events", "append", "table events")
    try:
        # Killed after the SQL INSERT: the CREATE TABLE AS before it (row 2) and the insert (row 3)
        # are both behind the kill.
        run_dir = submit_and_kill(root, "hive", [out], after_stage=insert, cwd=str(work), app=APP)
    finally:
        uninterrupted.wait(timeout=600)
    assert uninterrupted.returncode == 0, log.read_text()[-3000:]
    expected = report(str(plain / "out"))
    assert expected == EXPECTED
    assert (plain / "metastore_db").is_dir() and (work / "metastore_db").is_dir()  # Derby, in the driver's folder
    assert not os.path.exists(os.path.join(out, "report"))

    result = run_cli("resume", "hive", "--root", root)  # in the recorded folder, with its metastore
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ALREADY_EXISTS" not in result.stderr
    assert report(out) == expected  # 400 rows, not 500: the SQL insert ran once
    events = events_of(run_dir)
    second = [e for e in events if e["attempt"] == 2 and e["type"] in ("stage.skipped", "stage.committed")]
    # Each table, the Hive-format one too, is checked through the location the metastore gives it.
    committed = {e["stage"]: e["manifest"][0] for e in events if e["type"] == "stage.committed" and e["attempt"] == 1}
    assert {m["spark_path"] for m in committed.values()} == {
        f"file:{work}/spark-warehouse/events",
        f"file:{work}/spark-warehouse/legacy",
    }
    assert all(m["files"] for m in committed.values())
    # The inserts' manifests describe the tables now; each CREATE TABLE AS is skipped through the
    # insert that changed its table since, not reported lost.
    inserts = (implicit_stage(APP, "INSERT INTO legacy", "append", "table legacy"), insert)
    assert [e["reason"] for e in second if e["stage"] in inserts] == ["committed in attempt 1, output verified"] * 2
    creates = [e["reason"] for e in second if "errorifexists table" in e["stage"]]
    assert len(creates) == 2 and all("changed its output since" in reason for reason in creates), creates
    assert [(e["type"], e["stage"]) for e in second] == [
        ("stage.skipped", implicit_stage(APP, "CREATE TABLE events", "errorifexists", "table events")),
        ("stage.skipped", implicit_stage(APP, "CREATE TABLE legacy", "errorifexists", "table legacy")),
        ("stage.skipped", implicit_stage(APP, "INSERT INTO legacy", "append", "table legacy")),
        ("stage.skipped", insert),
        ("stage.committed", implicit_stage(APP, "write.insertInto", "append", "table events")),
        ("stage.committed", implicit_stage(APP, ".csv(", "overwrite", f"{out}/report")),
    ]


def test_killed_while_a_hive_format_table_is_created_resumes_to_the_same_tables(tmp_path):
    """Killed once the first CREATE TABLE AS committed, while the next one (a Hive-format table)
    runs its job: the metastore already holds that table (Spark creates a Hive table before it
    fills it). The resume skips the first, drops what the second left and creates it again."""
    out, root = str(tmp_path / "out"), str(tmp_path / "root")
    legacy = implicit_stage(APP, "CREATE TABLE legacy", "errorifexists", "table legacy")
    run_dir = submit_and_kill(
        root,
        "ctas",
        [out],
        after_stage=legacy,
        event="spark.job.started",
        cwd=str(tmp_path),
        app=APP,
        submit_options=("--flush-interval", "0.05"),
    )

    result = run_cli("resume", "ctas", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ALREADY_EXISTS" not in result.stderr
    assert report(out) == EXPECTED
    second = [e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] in ("stage.skipped", "stage.committed")]
    assert [(e["type"], e["stage"]) for e in second][:2] == [
        ("stage.skipped", implicit_stage(APP, "CREATE TABLE events", "errorifexists", "table events")),
        ("stage.committed", legacy),
    ]
    (restarted,) = [
        e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] == "stage.started" and e["stage"] == legacy
    ]
    assert "table legacy" in restarted["cleaned"]  # the half-made table was dropped first
