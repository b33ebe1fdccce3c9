"""Real spark-submit runs with the journal on S3 (a moto server on 127.0.0.1): killed and resumed,
an S3 outage in the middle of a run, and s3a:// checkpoints verified at s3://.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import fsspec
import orjson
import pytest

from sparkrecover.rundir import storage
from tests.e2e.support import PIPELINE, needs_s3a, s3a_options, submit_and_kill, submit_command
from tests.helpers import events_of, run_cli, wait_for

APP_ARGS = ["--rows", "60000", "--pause", "1"]
SECRET = "sparkrecover-test-secret-7f3a"  # moto takes any key: a distinctive one to look for

pytestmark = pytest.mark.e2e


# -- end to end: real spark-submit, journal on S3 --------------------------------------------------


def all_bytes_under(url: str) -> bytes:
    fs, path = storage.filesystem(url)
    fs.invalidate_cache()
    return b"".join(fs.cat_file(name) for name in fs.find(path))


@pytest.mark.e2e
def test_killed_run_with_its_journal_on_s3_resumes_with_identical_output(tmp_path, s3, monkeypatch, pipeline_reference):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    root, out, checkpoints = s3.prefix, str(tmp_path / "out"), str(tmp_path / "checkpoints")
    run_dir = submit_and_kill(
        root, "nightly", [out, *APP_ARGS], after_stage="clean", submit_options=("--checkpoint-root", checkpoints)
    )
    result = run_cli("resume", "nightly", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")

    second = [e for e in events_of(run_dir) if e["attempt"] == 2]
    assert {e["stage"] for e in second if e["type"] == "stage.skipped"} == {"orders", "clean"}
    assert [e["stage"] for e in second if e["type"] == "stage.committed"] == ["daily", "publish"]
    # checkpoints went to --checkpoint-root (recorded, so resume used it too), not the S3 run dir
    assert sorted(os.listdir(os.path.join(checkpoints, "nightly"))) == ["clean", "daily", "orders"]
    names = storage.listdir(run_dir)
    assert "checkpoints" not in names and "lease.json" not in names
    assert storage.exists(run_dir + "/plans/0002.json")
    # a finished attempt's segments were compacted: one object per writer
    assert [s.rsplit("/", 1)[-1] for s in storage.listdir(run_dir + "/journal") if s.startswith("0002")] == [
        "0002-cli-000000.jsonl",
        "0002-driver-000000.jsonl",
    ]
    assert SECRET.encode() not in all_bytes_under(run_dir)


@pytest.mark.e2e
def test_an_s3_outage_mid_run_is_survived_recorded_and_planned_around(tmp_path, s3, pipeline_reference):
    root, out = s3.prefix, str(tmp_path / "out")
    run_dir = storage.join(root, "outage")
    checkpoints = ("--checkpoint-root", str(tmp_path / "checkpoints"))
    process = subprocess.Popen(
        submit_command(root, "outage", PIPELINE, out, *APP_ARGS, submit_options=checkpoints),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # botocore would otherwise retry a refused connection for ~8 s inside one request
        env={**os.environ, "AWS_MAX_ATTEMPTS": "1"},
    )
    try:
        try:
            wait_for(run_dir, "stage.committed", "orders", process=process)
        except AssertionError:
            raise AssertionError(process.communicate()[1][-3000:]) from None
        s3.stop()
        time.sleep(5)  # clean starts and commits while S3 refuses every connection
        s3.start()
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")
    spark_log = re.compile(r"^(\d\d/\d\d/\d\d \d\d:|\s+at |py4j\.)")
    warnings = " ".join(line for line in err.splitlines() if not spark_log.match(line))
    assert "the journal's storage failed from" in " ".join(warnings.split()), warnings[-3000:]

    records = events_of(run_dir)
    gaps = [e for e in records if e["type"] == "journal.degraded"]
    assert gaps and all(g["dropped_events"] == 0 for g in gaps)
    assert any(g["writer"] == "driver" for g in gaps)
    driver = [e for e in records if e["writer"] == "driver"]
    assert [e["seq"] for e in driver] == list(range(len(driver)))  # nothing lost, nothing twice
    assert [e["stage"] for e in records if e["type"] == "stage.committed"] == ["orders", "clean", "daily", "publish"]

    plan = run_cli("resume", "outage", "--root", root, "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    document = orjson.loads(plan.stdout)
    assert document["complete"] is True
    assert [(s["stage"], s["decision"]) for s in document["stages"]] == [
        ("orders", "skip"),
        ("clean", "skip"),
        ("daily", "skip"),
        ("publish", "skip"),
    ]
    inspected = orjson.loads(run_cli("inspect", "outage", "--root", root, "--json").stdout)
    assert inspected["journal_degraded"] == len(gaps)


# -- end to end: checkpoints written by Spark to s3a://, verified by the CLI at s3:// ---------------


@pytest.mark.e2e
@needs_s3a
def test_s3a_checkpoints_are_verified_at_s3_and_skipped_on_resume(tmp_path, s3, pipeline_reference):
    root, out = s3.prefix + "/runs", str(tmp_path / "out")
    checkpoints = s3.prefix + "/data"
    run_dir = submit_and_kill(
        root,
        "lake",
        [out, *APP_ARGS],
        after_stage="clean",
        submit_options=("--checkpoint-root", checkpoints),
        spark_options=tuple(s3a_options(s3.endpoint)),
    )
    committed = {e["stage"]: e for e in events_of(run_dir) if e["type"] == "stage.committed"}
    output = committed["orders"]["manifest"][0]
    assert output["path"] == checkpoints + "/lake/orders"
    assert output["spark_path"] == "s3a" + checkpoints[2:] + "/lake/orders"
    assert output["file_count"] > 0 and output["success"] is True

    plan = run_cli("resume", "lake", "--root", root, "--dry-run", "--json")
    assert [(s["stage"], s["decision"]) for s in orjson.loads(plan.stdout)["stages"]][:2] == [
        ("orders", "skip"),
        ("clean", "skip"),
    ]
    result = run_cli("resume", "lake", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == pipeline_reference.text("out", "report.txt")
    second = [e for e in events_of(run_dir) if e["attempt"] == 2]
    assert {e["stage"] for e in second if e["type"] == "stage.skipped"} == {"orders", "clean"}
    fs = fsspec.filesystem("s3")
    fs.invalidate_cache()
    assert fs.find(checkpoints[len("s3://") :] + "/lake/daily")  # Spark wrote it, s3fs sees it
