"""Inferred schemas in-process: recorded in one attempt, reused by the next without
Spark's inference pass, against a real SparkSession."""

from __future__ import annotations

import json
import os

import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import schema_reuse
from sparkrecover.driver.process import runtime
from sparkrecover.driver.recording import schema_reads
from sparkrecover.journal import events as ev
from sparkrecover.journal import read_journal
from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import Plan
from tests.helpers import install_runtime, jobs_of, journal

HERE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def schema_hooks(hooked):
    """Reads that infer a schema hooked too, as the bootstrap hooks them (the hooks fixture puts
    every hooked method back, the reader's too)."""
    schema_reads.install()


def write_lines(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def raw(tmp_path):
    """A folder of two JSON files."""
    folder = tmp_path / "raw"
    write_lines(folder / "a.json", [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    write_lines(folder / "b.json", [{"id": 3, "name": "c", "score": 1.5}])
    return folder


def events(rt, event_type):
    """What this runtime's attempt journaled of one type (the run directory holds the earlier ones too)."""
    return [r for r in journal(rt, event_type) if r["attempt"] == rt.writer.attempt]


# One line per kind of read, as a script rerun by resume has: the call site is part of the key.
def read_json(spark, path):
    return spark.read.json(str(path))


def read_json_with(reader, path):
    return reader.json(str(path))


def load_csv(spark, path):
    return spark.read.format("csv").option("header", True).option("inferSchema", "true").load(str(path))


def load_parquet(spark, path):
    return spark.read.option("mergeSchema", "true").parquet(str(path))


def resumed(tmp_path, rt, **options):
    """The next attempt's runtime, its plan carrying the schemas resume would hand it."""
    rt.writer.close()
    state = RunState.from_events("run1", read_journal(rt.run_dir))
    attempt = max(state.attempts) + 1
    plan = Plan("run1", attempt, [], schema_reuse.reusable(state, storage.stat, **options))
    return install_runtime(tmp_path, plan, attempt=attempt)


def test_an_inferred_schema_is_journaled_with_the_files_it_read(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    frame, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs  # the inference pass: what a resume saves
    (record,) = events(rt, ev.SCHEMA_INFERRED)
    assert record["format"] == "json" and record["paths"] == [str(raw)]
    assert record["call_site"].startswith(f"{HERE}:") and record["key"].startswith(record["call_site"] + " json ")
    assert record["schema"] == frame.schema.jsonValue()
    assert [row[0] for row in record["input_files"]] == [str(raw / "a.json"), str(raw / "b.json")]
    assert [row[1] for row in record["input_files"]] == [
        os.path.getsize(raw / "a.json"),
        os.path.getsize(raw / "b.json"),
    ]
    assert record["input_count"] == 2 and record["duration_s"] >= 0


def test_a_resumed_read_takes_the_recorded_schema_and_runs_no_job(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    first = read_json(spark, raw)
    rt = resumed(tmp_path, rt)
    assert len(rt.schemas) == 1
    frame, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs == []  # no inference pass: the files were listed, not read
    assert frame.schema == first.schema
    assert sorted(map(tuple, frame.collect())) == sorted(map(tuple, first.collect()))
    (reused,) = events(rt, ev.SCHEMA_REUSED)
    assert reused["key"] == next(iter(rt.schemas)) and reused["inferred_in"] == 1
    assert events(rt, ev.SCHEMA_INFERRED) == []


def test_a_read_the_script_caches_reads_its_cache(spark, tmp_path, raw):
    """Spark keeps the first optimized plan a DataFrame made: listing the files through the read's
    own DataFrame, before the script's cache(), left that DataFrame reading the files again, never
    its cache (and an action's check for a cache saw none: docs/replay.md)."""
    rt = install_runtime(tmp_path)
    for _ in range(2):  # the schema inferred, then reused
        frame = read_json(spark, raw).cache()
        try:
            assert "InMemoryRelation" in frame._jdf.queryExecution().optimizedPlan().toString()
        finally:
            frame.unpersist()
        rt = resumed(tmp_path, rt)


def test_a_rewritten_input_file_is_not_planned_and_the_schema_is_inferred_again(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    read_json(spark, raw)
    write_lines(raw / "a.json", [{"id": 1, "name": "a", "extra": True}])
    rt = resumed(tmp_path, rt)
    assert rt.schemas == {}  # the command line saw the file change
    frame, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs and "extra" in frame.columns
    assert events(rt, ev.SCHEMA_REUSED) == []
    (again,) = events(rt, ev.SCHEMA_INFERRED)
    assert "extra" in json.dumps(again["schema"])


def test_a_file_added_after_planning_is_found_by_the_driver(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    read_json(spark, raw)
    rt = resumed(tmp_path, rt)
    assert len(rt.schemas) == 1  # planned: every recorded file is as it was
    write_lines(raw / "c.json", [{"id": 4, "added": "yes"}])
    frame, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs and "added" in frame.columns  # inferred again, with the new file's field
    assert events(rt, ev.SCHEMA_REUSED) == []
    assert [r["input_count"] for r in events(rt, ev.SCHEMA_INFERRED)] == [3]


def test_a_schema_the_user_gives_or_a_read_that_infers_nothing_is_left_alone(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    spark.read.schema("id long").json(str(raw))
    spark.read.json(str(raw), schema="id long")
    spark.read.schema("id long").csv(str(raw))
    spark.read.parquet  # noqa: B018  (the attribute alone does nothing)
    assert events(rt, ev.SCHEMA_INFERRED) == []


def read_csv_header(spark, path):
    return spark.read.option("header", True).csv(str(path))


def test_a_csv_read_without_infer_schema_still_reads_its_header_in_a_job_and_reuses_it(spark, tmp_path):
    csv = tmp_path / "plain.csv"
    csv.write_text("id,price\n1,2.5\n")
    rt = install_runtime(tmp_path)
    first, jobs = jobs_of(spark, lambda: read_csv_header(spark, csv))
    assert jobs  # Spark reads the first line for the column names
    assert dict(first.dtypes) == {"id": "string", "price": "string"}
    rt = resumed(tmp_path, rt)
    again, jobs = jobs_of(spark, lambda: read_csv_header(spark, csv))
    assert (jobs, again.schema) == ([], first.schema)
    assert [r["format"] for r in events(rt, ev.SCHEMA_REUSED)] == ["csv"]


def read_parquet_plain(spark, path):
    return spark.read.parquet(str(path))


def test_a_parquet_read_without_merge_schema_reads_its_footers_in_a_job_and_reuses_them(spark, tmp_path):
    parts = tmp_path / "plain-parquet"
    spark.range(4, numPartitions=2).selectExpr("id", "id * 2 AS twice").write.parquet(str(parts))
    rt = install_runtime(tmp_path)
    first, jobs = jobs_of(spark, lambda: read_parquet_plain(spark, parts))
    assert jobs  # Spark reads a footer in a job to learn the schema
    rt = resumed(tmp_path, rt)
    again, jobs = jobs_of(spark, lambda: read_parquet_plain(spark, parts))
    assert (jobs, again.schema) == ([], first.schema)
    assert sorted(map(tuple, again.collect())) == sorted(map(tuple, first.collect()))
    assert [r["format"] for r in events(rt, ev.SCHEMA_REUSED)] == ["parquet"]


def test_options_are_part_of_the_key(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    read_json_with(spark.read, raw)
    rt = resumed(tmp_path, rt)
    frame = read_json_with(spark.read.option("primitivesAsString", "true"), raw)
    assert dict(frame.dtypes)["id"] == "string"  # what pyspark infers with that option
    assert events(rt, ev.SCHEMA_REUSED) == []
    (inferred,) = events(rt, ev.SCHEMA_INFERRED)
    assert inferred["key"] not in rt.schemas
    # The reader the user passes on after a reused read carries no schema of ours.
    reader = spark.read
    read_json_with(reader, raw)
    assert len(events(rt, ev.SCHEMA_REUSED)) == 1
    other = tmp_path / "other"
    write_lines(other / "x.json", [{"word": "w"}])
    assert read_json_with(reader, other).columns == ["word"]


def test_csv_and_merged_parquet_through_format_and_load(spark, tmp_path):
    csv = tmp_path / "table.csv"
    csv.write_text("id,price\n1,2.5\n2,3.0\n")
    parts = tmp_path / "parts"
    spark.range(3).selectExpr("id").write.parquet(str(parts / "p=1"))
    spark.range(3).selectExpr("id", "id * 2 AS twice").write.parquet(str(parts / "p=2"))
    rt = install_runtime(tmp_path)
    first_csv, csv_jobs = jobs_of(spark, lambda: load_csv(spark, csv))
    first_parquet, parquet_jobs = jobs_of(spark, lambda: load_parquet(spark, parts))
    assert csv_jobs and parquet_jobs
    assert dict(first_csv.dtypes) == {"id": "int", "price": "double"}
    assert set(first_parquet.columns) == {"id", "twice", "p"}
    assert [r["format"] for r in events(rt, ev.SCHEMA_INFERRED)] == ["csv", "parquet"]
    rt = resumed(tmp_path, rt)
    again_csv, csv_jobs = jobs_of(spark, lambda: load_csv(spark, csv))
    again_parquet, parquet_jobs = jobs_of(spark, lambda: load_parquet(spark, parts))
    assert (csv_jobs, parquet_jobs) == ([], [])
    assert (again_csv.schema, again_parquet.schema) == (first_csv.schema, first_parquet.schema)
    assert sorted(map(repr, again_parquet.collect())) == sorted(map(repr, first_parquet.collect()))
    assert [r["format"] for r in events(rt, ev.SCHEMA_REUSED)] == ["csv", "parquet"]


def test_from_scratch_reuses_nothing(spark, tmp_path, raw):
    rt = install_runtime(tmp_path)
    read_json(spark, raw)
    rt = resumed(tmp_path, rt, from_scratch=True)
    _, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs and events(rt, ev.SCHEMA_REUSED) == []


def test_without_a_runtime_reads_are_pysparks(spark, tmp_path, raw):
    runtime.install(None)
    frame, jobs = jobs_of(spark, lambda: read_json(spark, raw))
    assert jobs and frame.count() == 3
    assert not (tmp_path / "root").exists()


def test_a_failure_of_ours_warns_once_and_reads_as_pyspark(spark, tmp_path, raw, capsys, monkeypatch):
    rt = install_runtime(tmp_path)

    def broken(*_args):
        raise OSError("storage down")

    monkeypatch.setattr(schema_reads, "stat_files", broken)
    assert read_json(spark, raw).count() == 3
    assert read_json(spark, raw).count() == 3
    assert capsys.readouterr().err.count("sparkrecover: warning:") == 1
    assert events(rt, ev.SCHEMA_INFERRED) == []


def test_a_missing_path_fails_as_in_pyspark(spark, tmp_path):
    install_runtime(tmp_path)
    with pytest.raises(Exception, match=r"PATH_NOT_FOUND|does not exist"):
        read_json(spark, tmp_path / "nowhere")
