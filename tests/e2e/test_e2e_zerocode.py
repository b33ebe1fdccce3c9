"""Zero-code mode end to end: unmodified scripts on real spark-submit, real SIGKILL, resume."""

from __future__ import annotations

import glob
import os
import subprocess

import pyspark
import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import APPS, recorded, run_and_kill, side_by_side, submit_and_kill, submit_command
from tests.helpers import SPARK_OPTIONS, events_of, implicit_stage, run_cli
from tests.references import FOLDER, plain_env

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "zerocode_app.py")
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "examples", "src", "main", "python")
SEED = '{"id": 1}\n{"id": 2}\n'


def prepare(folder) -> str:
    """A working folder whose OUT/events already holds data; returns OUT."""
    out = folder / "out"
    (out / "events").mkdir(parents=True)
    (out / "events" / "part-seed.json").write_text(SEED)
    return str(out)


def csv_lines(folder: str) -> list[str]:
    lines = []
    for name in sorted(glob.glob(os.path.join(folder, "part-*"))):
        lines += open(name).read().splitlines()
    return lines


def event_ids(out: str) -> list[int]:
    ids = []
    for name in glob.glob(os.path.join(out, "events", "*.json")):
        ids += [int(line.split(":")[1].strip(" }")) for line in open(name).read().splitlines() if line]
    return sorted(ids)


@pytest.fixture
def uninterrupted(plain_runs):
    """The app under plain spark-submit (beside the test's killed run): its report, once done."""
    plain = plain_runs.start(APP, f"{FOLDER}/out", seed=prepare)

    def report() -> list[str]:
        assert event_ids(plain.path("out")) == [1, 2, *range(100, 140)]
        return csv_lines(plain.path("out", "report"))

    return report


def test_killed_after_the_append_and_table_commit_resumes_without_duplicates(tmp_path, uninterrupted):
    out, root = prepare(tmp_path), str(tmp_path / "root")
    base = implicit_stage(APP, '.parquet(f"{out}/base")', "overwrite", f"{out}/base")
    append = implicit_stage(APP, 'mode("append")', "append", f"{out}/events")
    table = implicit_stage(APP, "saveAsTable", "errorifexists", "table events_copy")
    run_dir = submit_and_kill(root, "zc", [out], after_stage=table, cwd=str(tmp_path), app=APP)
    assert event_ids(out) == [1, 2, *range(100, 140)]

    result = run_cli("resume", "zc", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert event_ids(out) == [1, 2, *range(100, 140)]  # each row exactly once
    assert csv_lines(os.path.join(out, "report")) == uninterrupted()
    second = [e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"].startswith("stage.")]
    assert [(e["type"], e["stage"]) for e in second if e["type"] != "stage.started"][:3] == [
        ("stage.skipped", base),
        ("stage.skipped", append),
        ("stage.skipped", table),
    ]
    assert [e["stage"].split(" ", 1)[1] for e in second if e["type"] == "stage.committed"] == [
        f"overwrite {out}/report"
    ]


def test_killed_during_the_append_leaves_no_partial_files_after_resume(tmp_path, uninterrupted):
    out, root = prepare(tmp_path), str(tmp_path / "root")
    append = implicit_stage(APP, 'mode("append")', "append", f"{out}/events")
    run_dir = os.path.join(root, "half")
    # Commit algorithm 2 moves each finished task's files into the target at once: a job killed
    # half way leaves part files there, as well as its _temporary folder.
    options = [*SPARK_OPTIONS, "--conf", "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version=2"]
    command = submit_command(root, "half", APP, out, "--slow-marker", str(tmp_path / "slowed"), spark_options=options)
    started = recorded(run_dir, "stage.started", append)

    def half_written() -> bool:  # the app holds the append's task of row 107 until it is killed
        return started() and len(glob.glob(os.path.join(out, "events", "part-0*"))) >= 3

    run_and_kill(command, half_written, "3 files of the append", cwd=str(tmp_path), timeout=360)
    partial = glob.glob(os.path.join(out, "events", "part-0*"))
    assert len(partial) == 3 and os.path.isdir(os.path.join(out, "events", "_temporary"))
    assert not any(e["type"] == "stage.committed" and e["stage"] == append for e in events_of(run_dir))

    result = run_cli("resume", "half", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert event_ids(out) == [1, 2, *range(100, 140)]
    assert not set(partial) & set(glob.glob(os.path.join(out, "events", "*")))
    assert not os.path.exists(os.path.join(out, "events", "_temporary"))
    assert csv_lines(os.path.join(out, "report")) == uninterrupted()
    (restarted,) = [
        e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] == "stage.started" and e["stage"] == append
    ]
    assert set(partial) | {os.path.join(out, "events", "_temporary")} <= set(restarted["cleaned"])


@pytest.mark.parametrize("example", ["wordcount.py", "sort.py", "sql/basic.py"])
def test_pyspark_examples_print_the_same_under_submit(tmp_path, example):
    words = tmp_path / "words.txt"  # numbers: sort.py reads integers
    words.write_text("3 1 2 10\n20 4 1\n")
    resources = tmp_path / "examples" / "src" / "main" / "resources"  # sql/basic.py reads from its cwd
    resources.mkdir(parents=True)
    (resources / "people.json").write_text(
        '{"name":"Michael"}\n{"name":"Andy", "age":30}\n{"name":"Justin", "age":19}\n'
    )
    (resources / "people.txt").write_text("Michael, 29\nAndy, 30\nJustin, 19\n")
    script = os.path.normpath(os.path.join(EXAMPLES, example))
    args = [] if example.startswith("sql/") else [str(words)]
    plain, wrapped = side_by_side(
        lambda: subprocess.run(
            [find_spark_submit(), *SPARK_OPTIONS, script, *args],
            capture_output=True,
            text=True,
            timeout=600,
            env=plain_env(),
            cwd=tmp_path,
        ),
        lambda: run_cli(
            "submit",
            "--root",
            str(tmp_path / "root"),
            "--",
            *SPARK_OPTIONS,
            script,
            *args,
            cwd=str(tmp_path),
            timeout=600,
        ),
    )
    assert plain.stdout and (wrapped.returncode, wrapped.stdout) == (plain.returncode, plain.stdout), wrapped.stderr[
        -3000:
    ]


RDD_APP = os.path.join(os.path.dirname(APP), "rdd_app.py")


def test_killed_after_an_rdd_save_resumes_without_file_already_exists(tmp_path, plain_runs):
    plain = plain_runs.start(RDD_APP, f"{FOLDER}/out")  # goes on beside the killed run
    out, root = str(tmp_path / "out"), str(tmp_path / "root")
    pickled = implicit_stage(RDD_APP, "saveAsPickleFile", "errorifexists", f"{out}/pickled")
    run_dir = submit_and_kill(root, "rdd", [out], after_stage=pickled, cwd=str(tmp_path), app=RDD_APP)
    assert not os.path.exists(os.path.join(out, "report", "_SUCCESS"))
    expected = csv_lines(plain.path("out", "report"))
    assert len(expected) == 5

    result = run_cli("resume", "rdd", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FileAlreadyExistsException" not in result.stdout + result.stderr
    assert csv_lines(os.path.join(out, "report")) == expected
    second = [e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] in ("stage.skipped", "stage.committed")]
    assert [(e["type"], e["stage"].split(" ", 1)[1]) for e in second] == [
        ("stage.skipped", f"errorifexists {out}/text"),
        ("stage.skipped", f"errorifexists {out}/pickled"),
        ("stage.committed", f"errorifexists {out}/report"),
    ]


SQL_APP = os.path.join(os.path.dirname(APP), "sql_app.py")


def test_killed_after_a_sql_insert_into_resumes_with_each_row_once(tmp_path, plain_runs):
    plain = plain_runs.start(SQL_APP, f"{FOLDER}/out")  # goes on beside the killed run
    work = tmp_path / "work"
    work.mkdir()
    out, root = str(work / "out"), str(tmp_path / "root")
    insert = implicit_stage(SQL_APP, "INSERT INTO events", "append", "table events")
    run_dir = submit_and_kill(root, "sql", [out], after_stage=insert, cwd=str(work), app=SQL_APP)
    assert not os.path.exists(os.path.join(out, "report"))
    expected = csv_lines(plain.path("out", "report"))
    assert [line.split(",")[0] for line in expected] == ["0", "1", "2"]
    assert sum(int(line.split(",")[1]) for line in expected) == 40

    result = run_cli("resume", "sql", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert csv_lines(os.path.join(out, "report")) == expected  # 40 rows, each once
    copied = []
    for name in glob.glob(os.path.join(out, "copy", "part-*")):
        copied += open(name).read().splitlines()
    assert len(copied) == 40
    second = [e for e in events_of(run_dir) if e["attempt"] == 2 and e["type"] in ("stage.skipped", "stage.committed")]
    assert [(e["type"], e["stage"].split(" ", 1)[1]) for e in second] == [
        ("stage.skipped", "errorifexists table events"),
        ("stage.skipped", "append table events"),
        ("stage.committed", f"overwrite {out}/copy"),
        ("stage.committed", f"overwrite {out}/report"),
    ]
