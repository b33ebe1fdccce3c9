"""Tables come back as they were, and SQL DDL on recorded tables as stages
(item 1): in-process, against the shared SparkSession, whose in-memory catalog stands in for a
new driver's once a test makes it forget a table (its files stay)."""

from __future__ import annotations

import os

import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.driver.process import runtime
from sparkrecover.driver.recording import tables
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.planning.storage_evidence import StorageEvidence
from tests.helpers import install_runtime, journal, marked_line

HERE = os.path.basename(__file__)
pytestmark = pytest.mark.usefixtures("hooked")


@pytest.fixture
def db(spark, tmp_path):
    """A database of its own under tmp_path (the shared session's warehouse is elsewhere)."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS tbl LOCATION '{tmp_path / 'tbl.db'}'")
    yield "tbl"
    spark.sql("DROP DATABASE IF EXISTS tbl CASCADE")


def plan(rt):
    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    return planner.make_plan(state, StorageEvidence(rt.run_dir))


def resume(tmp_path, rt, forget=()):
    """The next attempt, in a driver whose catalog lost ``forget`` (as a new driver's has)."""
    decisions = plan(rt)
    attempt = max(d.committed.attempt for d in decisions if d.committed) + 1
    runtime.install(None)
    for table in forget:
        forget_table(rt_spark(), table)
    return install_runtime(
        tmp_path, planner.plan_of(planner.StageDecisions("run1", attempt, decisions)), attempt=attempt
    )


def rt_spark():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def forget_table(spark, table):
    """Drop the catalog entry, keep the files: what a driver restart does to an in-memory catalog."""
    if spark.catalog.tableExists(table):
        tables.set_type(spark, table, "EXTERNAL")
        spark.sql(f"DROP TABLE {table}")


def metadata(spark, table) -> dict:
    return tables.describe(spark, table)


def location_of(spark, table) -> str:
    return metadata(spark, table)["location"].replace("file:", "")


def sql(spark, statement):
    return spark.sql(statement)  # sql call


def save(frame, table):
    frame.write.saveAsTable(table)  # one call site in every attempt, as a rerun script has


def write_tables(spark):
    sql(
        spark,
        "CREATE TABLE tbl.t1 USING parquet PARTITIONED BY (p) TBLPROPERTIES ('team' = 'ops') "
        "AS SELECT id, id % 2 AS p FROM range(6)",
    )
    spark.range(4).selectExpr("id", "CAST(id AS STRING) AS s").write.format("csv").option("header", "true").saveAsTable(
        "tbl.t2"
    )  # saveAsTable call


def test_a_skipped_table_write_registers_its_table_as_it_was(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    write_tables(spark)
    before = {table: metadata(spark, table) for table in ("tbl.t1", "tbl.t2")}
    assert before["tbl.t1"]["type"] == "MANAGED" and before["tbl.t1"]["partition_columns"] == ["p"]
    committed = journal(rt, ev.STAGE_COMMITTED)
    assert [c["table"]["name"] for c in committed] == ["t1", "t2"]
    assert committed[0]["table"]["properties"] == {"team": "ops"}
    assert committed[1]["table"]["options"] == {"header": "true"}
    rt2 = resume(tmp_path, rt, forget=["tbl.t1", "tbl.t2"])
    assert [d.decision for d in rt2.decisions.values()] == ["skip", "skip"]
    assert not spark.catalog.tableExists("tbl.t1")
    write_tables(spark)
    assert [r["type"] for r in journal(rt2) if r["attempt"] == 2] == [ev.STAGE_SKIPPED] * 2
    for table in ("tbl.t1", "tbl.t2"):
        assert metadata(spark, table) == before[table]
    assert sorted(r.id for r in spark.table("tbl.t1").where("p = 1").collect()) == [1, 3, 5]
    assert sorted((r.id, r.s) for r in spark.table("tbl.t2").collect()) == [(i, str(i)) for i in range(4)]
    folder = location_of(spark, "tbl.t1")
    spark.sql("DROP TABLE tbl.t1")  # MANAGED again: the drop removes its files, as in a plain run
    assert not os.path.exists(folder)


def test_a_lost_table_write_registers_its_table_too(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    save(spark.range(4, numPartitions=2), "tbl.t3")
    folder = location_of(spark, "tbl.t3")
    os.remove(os.path.join(folder, sorted(n for n in os.listdir(folder) if n.startswith("part-"))[0]))
    rt2 = resume(tmp_path, rt, forget=["tbl.t3"])
    assert [d.decision for d in rt2.decisions.values()] == ["lost"]
    save(spark.range(4, numPartitions=2), "tbl.t3")
    assert metadata(spark, "tbl.t3")["type"] == "MANAGED"
    assert spark.table("tbl.t3").count() == 2  # what survived: lost is reported, not redone


def test_an_older_record_without_the_table_registers_an_external_table_as_before(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    save(spark.range(3), "tbl.t4")
    decisions = plan(rt)
    for decision in decisions:
        decision.committed.table = None
    runtime.install(None)
    forget_table(spark, "tbl.t4")
    install_runtime(tmp_path, planner.plan_of(planner.StageDecisions("run1", 2, decisions)), attempt=2)
    save(spark.range(3), "tbl.t4")
    assert metadata(spark, "tbl.t4")["type"] == "EXTERNAL"
    assert spark.table("tbl.t4").count() == 3


def test_create_drop_and_truncate_of_recorded_tables_are_stages(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    for statement in (
        "CREATE TABLE tbl.t5 (id BIGINT) USING parquet",
        "INSERT INTO tbl.t5 SELECT id FROM range(3)",
        "TRUNCATE TABLE tbl.t5",
        "DROP TABLE tbl.t5",
        "CREATE TEMPORARY VIEW v5 AS SELECT 1 AS id",
        "DROP VIEW v5",
    ):
        sql(spark, statement)
    runtime.install(None)
    spark.sql(f"CREATE TABLE tbl.other (id BIGINT) USING parquet LOCATION '{tmp_path / 'other'}'")
    runtime.install(rt)
    sql(spark, "DROP TABLE tbl.other")  # no stage wrote it: its drop is not one
    site = f"{HERE}:{marked_line(__file__, 'sql call')}"
    named = [r["stage"] for r in journal(rt, ev.STAGE_STARTED)]
    assert named == [
        f"{site}#1 create table tbl.t5",
        f"{site}#1 append table tbl.t5",
        f"{site}#1 truncate table tbl.t5",
        f"{site}#1 drop table tbl.t5",
    ]
    drop = journal(rt, ev.STAGE_COMMITTED)[3]
    assert drop["manifest"][0]["absent"] is True and drop["manifest"][0]["file_count"] == 0
    decisions = plan(rt)
    assert [(d.decision, d.reason.split(";")[-1].strip()) for d in decisions[:4]] == [
        ("skip", f"{site}#1 append table tbl.t5 changed its output since"),
        ("skip", f"{site}#1 truncate table tbl.t5 changed its output since"),
        ("skip", f"{site}#1 drop table tbl.t5 dropped its table since"),
        ("skip", "committed in attempt 1, output verified"),
    ]


def test_later_writes_to_a_table_leave_its_earlier_writes_skipped_not_lost(spark, tmp_path, db):
    rt = install_runtime(tmp_path)

    def script():
        spark.range(3).write.saveAsTable("tbl.t6")
        sql(spark, "INSERT OVERWRITE TABLE tbl.t6 SELECT id FROM range(10, 13)")
        sql(spark, "INSERT INTO tbl.t6 SELECT id FROM range(20, 22)")
        spark.range(2).write.saveAsTable("tbl.t7")
        sql(spark, "DROP TABLE tbl.t7")

    script()
    folder = str(tmp_path / "tbl.db" / "t7")
    assert not os.path.exists(folder)
    rt2 = resume(tmp_path, rt, forget=["tbl.t6"])
    assert [d.decision for d in rt2.decisions.values()] == ["skip"] * 5
    script()
    assert [r["type"] for r in journal(rt2) if r["attempt"] == 2] == [ev.STAGE_SKIPPED] * 5
    assert sorted(r.id for r in spark.table("tbl.t6").collect()) == [10, 11, 12, 20, 21]
    assert not spark.catalog.tableExists("tbl.t7") and not os.path.exists(folder)


def test_a_catalog_that_survives_is_checked_against_the_recorded_location(spark, tmp_path, db):
    spark.range(2).write.saveAsTable("tbl.t8")
    location = metadata(spark, "tbl.t8")["location"]
    assert tables.catalog_problem(spark, "tbl.t8", location) is None
    assert "not at" in tables.catalog_problem(spark, "tbl.t8", location + "-elsewhere")
    assert "not in the catalog" in tables.catalog_problem(spark, "tbl.t9", location)


def test_a_table_read_before_its_committed_drop_is_there_on_resume(spark, tmp_path, db):
    """Killed after the DROP: the resumed script still reads the table before it gets there."""
    rt = install_runtime(tmp_path)
    out = str(tmp_path / "out")

    def script():
        save(spark.range(3), "tbl.t10")
        read = spark.table("tbl.t10")  # analysed now: the table must exist
        read.write.mode("overwrite").json(out)  # copy call
        sql(spark, "DROP TABLE tbl.t10")

    script()
    rt2 = resume(tmp_path, rt)
    assert [d.decision for d in rt2.decisions.values()] == ["skip"] * 3
    script()
    assert [r["type"] for r in journal(rt2) if r["attempt"] == 2] == [ev.STAGE_SKIPPED] * 3
    assert not spark.catalog.tableExists("tbl.t10")
    assert not os.path.exists(tmp_path / "tbl.db" / "t10")


def test_a_stage_that_runs_again_rebuilds_a_table_it_read_that_was_changed_since(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    out = str(tmp_path / "out")

    def script():
        save(spark.range(3), "tbl.t11")
        spark.table("tbl.t11").write.mode("overwrite").json(out)
        sql(spark, "DROP TABLE tbl.t11")

    script()
    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    copy = next(name for name in state.stages if name.endswith(out))
    decisions = planner.make_plan(state, StorageEvidence(rt.run_dir), rerun=[copy])
    assert [d.decision for d in decisions] == ["rerun", "rerun", "rerun"]
    assert decisions[0].reason.endswith(f"needed by {copy}")
    runtime.install(None)
    install_runtime(tmp_path, planner.plan_of(planner.StageDecisions("run1", 2, decisions)), attempt=2)
    script()
    assert sorted(r.id for r in spark.read.json(out).collect()) == [0, 1, 2]
    assert not spark.catalog.tableExists("tbl.t11")


def test_with_a_surviving_catalog_a_skipped_write_whose_table_is_missing_runs_again(spark, tmp_path, db, monkeypatch):
    """Hive support: nothing is registered; the catalog is checked against the record instead.
    (The Hive metastore itself is the Hive end-to-end tests' business: here the branch is chosen.)"""
    rt = install_runtime(tmp_path)
    save(spark.range(3), "tbl.t12")
    save(spark.range(2), "tbl.t13")
    rt2 = resume(tmp_path, rt, forget=["tbl.t12"])  # the metastore lost t12; t13 is there
    monkeypatch.setattr(tables, "hive", lambda spark: True)
    save(spark.range(3), "tbl.t12")
    save(spark.range(2), "tbl.t13")
    second = [
        (r["type"], r.get("reason")) for r in journal(rt2) if r["attempt"] == 2 and r["type"].startswith("stage.")
    ]
    assert second == [
        (ev.STAGE_INVALIDATED, "table tbl.t12 is not in the catalog any more"),
        (ev.STAGE_STARTED, None),
        (ev.STAGE_COMMITTED, None),
        (ev.STAGE_SKIPPED, "committed in attempt 1, output verified"),
    ]
    assert spark.table("tbl.t12").count() == 3


def save_bucketed(spark):
    frame = spark.range(20).selectExpr("id", "id % 3 AS k")
    frame.write.bucketBy(4, "k").sortBy("id").format("parquet").saveAsTable("tbl.bucketed")  # bucketBy call


def describe_extended(spark, table) -> dict[str, str]:
    return {str(row[0]).strip(): str(row[1]) for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()}


def test_a_bucketed_table_comes_back_with_its_buckets(spark, tmp_path, db):
    rt = install_runtime(tmp_path)
    save_bucketed(spark)
    before = describe_extended(spark, "tbl.bucketed")
    assert (before["Num Buckets"], before["Bucket Columns"], before["Sort Columns"]) == ("4", "[`k`]", "[`id`]")
    (committed,) = journal(rt, ev.STAGE_COMMITTED)
    assert committed["table"]["buckets"] == {"count": 4, "columns": ["k"], "sort_columns": ["id"]}
    rt2 = resume(tmp_path, rt, forget=["tbl.bucketed"])
    save_bucketed(spark)
    assert [r["type"] for r in journal(rt2) if r["attempt"] == 2] == [ev.STAGE_SKIPPED]
    after = describe_extended(spark, "tbl.bucketed")
    keys = ("Type", "Provider", "Num Buckets", "Bucket Columns", "Sort Columns", "Location")
    assert {key: after.get(key) for key in keys} == {key: before.get(key) for key in keys}
    assert spark.table("tbl.bucketed").count() == 20
