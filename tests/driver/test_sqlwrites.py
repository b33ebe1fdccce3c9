"""Which SQL statements are writes: classified by Spark's own parser (driver/recording/sqlwrites.py), against
a real SparkSession without Hive support. docs/recorded.md lists the statements left alone."""

from __future__ import annotations

import os

import pytest

from sparkrecover.driver.recording import sqlwrites, writes
from sparkrecover.journal import events as ev
from tests.helpers import install_runtime, journal

pytestmark = pytest.mark.usefixtures("hooked")


@pytest.mark.parametrize(
    ("statement", "mode", "category", "target"),
    [
        ("LOAD DATA LOCAL INPATH 'kv1.txt' INTO TABLE src", "append", writes.APPEND, "table src"),
        ("LOAD DATA INPATH '/data/kv1.txt' INTO TABLE db.src", "append", writes.APPEND, "table db.src"),
        (
            "LOAD DATA LOCAL INPATH 'kv1.txt' OVERWRITE INTO TABLE src PARTITION (p = 1)",
            "overwrite",
            writes.OVERWRITE,
            "table src",
        ),
        ("CREATE TABLE copy LIKE src", "create", writes.CREATE, "table copy"),
        ("CREATE TABLE IF NOT EXISTS copy LIKE src USING parquet", "create", writes.CREATE, "table copy"),
    ],
)
def test_statements_that_write_are_classified_from_the_parsed_plan(spark, tmp_path, statement, mode, category, target):
    install_runtime(tmp_path)
    call = sqlwrites.describe(spark, statement)
    assert call is not None
    assert (call.mode, call.category, call.target) == (mode, category, target)
    assert call.name.endswith(f"#1 {mode} {target}")


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE src ADD PARTITION (p = 1) LOCATION '/tmp/p1'",
        "ALTER TABLE src SET LOCATION '/tmp/elsewhere'",
        "ALTER TABLE src DROP PARTITION (p = 1)",
        "ALTER TABLE src RENAME TO other",
        "ALTER TABLE src RECOVER PARTITIONS",
        "MSCK REPAIR TABLE src",
        "CACHE TABLE src",
        "ANALYZE TABLE src COMPUTE STATISTICS",
        "CREATE DATABASE d",
        "CREATE VIEW v AS SELECT 1",
        "SELECT * FROM src",
        "LOAD DATA LOCAL INPATH 'kv1.txt' INTO TABLE",  # the parser refuses it: Spark's own error
    ],
)
def test_statements_left_alone_are_not_writes(spark, tmp_path, statement):
    install_runtime(tmp_path)
    assert sqlwrites.describe(spark, statement) is None


def test_a_local_load_is_fingerprinted_by_its_file_a_moving_load_is_not(spark, tmp_path):
    install_runtime(tmp_path)
    (tmp_path / "kv1.txt").write_text("1\x01a\n")
    local = sqlwrites.describe(spark, "LOAD DATA LOCAL INPATH 'kv1.txt' INTO TABLE src")
    moved = sqlwrites.describe(spark, "LOAD DATA INPATH 'kv1.txt' INTO TABLE src")
    assert local is not None and moved is not None
    assert local.frame.inputFiles() == [f"file:{tmp_path / 'kv1.txt'}"]
    assert moved.frame.inputFiles() == []  # the load moves it away: gone is not changed


def test_without_hive_support_a_load_fails_as_in_a_plain_run_and_commits_nothing(spark, tmp_path):
    from pyspark.errors import AnalysisException

    spark.sql(f"CREATE TABLE csv_src (key INT, value STRING) USING csv LOCATION '{tmp_path / 'csv_src'}'")
    try:
        (tmp_path / "kv1.txt").write_text("1\x01a\n")
        with pytest.raises(AnalysisException) as plain:
            spark.sql("LOAD DATA LOCAL INPATH 'kv1.txt' INTO TABLE csv_src")
        rt = install_runtime(tmp_path)
        with pytest.raises(AnalysisException) as recorded:
            spark.sql("LOAD DATA LOCAL INPATH 'kv1.txt' INTO TABLE csv_src")
        assert str(recorded.value) == str(plain.value)  # "LOAD DATA is not supported for datasource tables"
        assert [r["type"] for r in journal(rt) if r["type"].startswith("stage.")] == [
            ev.STAGE_STARTED,
            ev.STAGE_FAILED,
        ]
        assert not os.path.exists(tmp_path / "csv_src")  # nothing written where it would load
    finally:
        spark.sql("DROP TABLE IF EXISTS csv_src")
