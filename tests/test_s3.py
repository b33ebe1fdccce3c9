"""The journal on S3 (a moto server on 127.0.0.1): the CLI's checks, then real spark-submit runs
killed and resumed from an S3 journal, an S3 outage in the middle of a run, and s3a:// checkpoints.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time

import fsspec
import orjson
import pytest

from sparkrecover.rundir import storage
from tests.helpers import (
    PIPELINE,
    SPARK_OPTIONS,
    events_of,
    plain_report,
    run_cli,
    sparkrecover_command,
    submit_and_kill,
    wait_for,
)

APP_ARGS = ["--rows", "60000", "--pause", "1"]
SECRET = "sparkrecover-test-secret-7f3a"  # moto takes any key: a distinctive one to look for


def fake_spark_submit(tmp_path) -> str:
    script = tmp_path / "spark-submit"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    (tmp_path / "app.py").write_text("print('hi')\n")
    return str(script)


# -- the CLI on S3 and other roots (no Spark) --------------------------------------------------------

@pytest.mark.parametrize("root", ["memory://runs", "./runs", "file:///tmp/runs"])
def test_cluster_mode_refuses_a_root_the_driver_cannot_reach(cli, tmp_path, root):
    code, out, err = cli("submit", "--root", root, "--spark-submit", fake_spark_submit(tmp_path), "--",
                         "--deploy-mode", "cluster", "app.py")
    assert code == 2 and out == ""
    assert "--deploy-mode cluster needs --root on shared storage" in err and "Traceback" not in err


def test_cluster_mode_accepts_an_s3_root_and_refuses_a_local_checkpoint_root(cli, tmp_path, s3):
    spark_submit = fake_spark_submit(tmp_path)
    code, _, err = cli("submit", "--root", s3.prefix, "--checkpoint-root", str(tmp_path / "ckpt"),
                       "--spark-submit", spark_submit, "--", "--deploy-mode", "cluster", "app.py")
    assert code == 2 and "--deploy-mode cluster needs --checkpoint-root on shared storage" in err
    code, out, err = cli("submit", "--root", s3.prefix, "--run-id", "c1", "--checkpoint-root",
                         s3.prefix + "/ckpt", "--spark-submit", spark_submit, "--json", "--",
                         "--deploy-mode", "cluster", "app.py")
    assert code == 0, err
    assert orjson.loads(out)["run_dir"] == s3.prefix + "/c1"
    # the fake spark-submit ran no driver: the CLI says the driver's journal is incomplete
    assert "no driver.ended record" in err
    started = [e for e in events_of(s3.prefix + "/c1") if e["type"] == "run.started"][0]
    assert started["checkpoint_root"] == s3.prefix + "/ckpt"
    assert not storage.exists(s3.prefix + "/c1/lease.json")


def test_unreachable_s3_is_one_line_and_exit_3(cli, monkeypatch, s3):
    import s3fs

    s3.stop()  # the port is closed: connection refused
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        code, out, err = cli("inspect", "--root", s3.prefix)
    finally:
        s3.start()
        s3fs.S3FileSystem.clear_instance_cache()
    assert code == 3 and out == ""
    assert err.startswith("error: ") and "could not list" in err and "Traceback" not in err
    assert err.count("error:") == 1  # one message (rich may wrap it at the terminal width)


def test_an_s3_run_directory_url_is_inspected_like_a_local_one(cli, s3, monkeypatch):
    from sparkrecover.journal import JournalWriter, events

    run_dir = s3.prefix + "/r9"
    writer = JournalWriter(run_dir, "r9", 1, "cli", flush_interval=0)
    writer.emit(events.RUN_STARTED, app="etl.py")
    writer.emit(events.ATTEMPT_ENDED, exit_code=0)
    writer.close()
    code, out, err = cli("inspect", "--root", s3.prefix, "--json")
    assert code == 0, err
    assert [row["run"] for row in orjson.loads(out)["runs"]] == ["r9"]
    code, out, _ = cli("inspect", run_dir, "--json")
    assert orjson.loads(out)["status"] == "succeeded"
    monkeypatch.setenv("SPARKRECOVER_ROOT", s3.prefix)
    code, out, _ = cli("inspect", "r9", "--json")
    assert (code, orjson.loads(out)["run_dir"]) == (0, run_dir)


def test_a_lease_on_s3_refuses_a_second_holder_until_released(s3):
    from sparkrecover.errors import LeaseHeldError
    from sparkrecover.rundir.lease import Lease

    run_dir = s3.prefix + "/held"
    first = Lease(run_dir, "held").acquire()
    try:
        with pytest.raises(LeaseHeldError):
            Lease(run_dir, "held").acquire()
    finally:
        first.release()
    assert not storage.exists(run_dir + "/lease.json")
    Lease(run_dir, "held").acquire().release()


# -- end to end: real spark-submit, journal on S3 --------------------------------------------------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The pipeline's report under plain spark-submit, without sparkrecover."""
    return plain_report(tmp_path_factory.mktemp("plain"))


def all_bytes_under(url: str) -> bytes:
    fs, path = storage.filesystem(url)
    fs.invalidate_cache()
    return b"".join(fs.cat_file(name) for name in fs.find(path))


@pytest.mark.e2e
def test_killed_run_with_its_journal_on_s3_resumes_with_identical_output(tmp_path, s3, monkeypatch, reference):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    root, out, checkpoints = s3.prefix, str(tmp_path / "out"), str(tmp_path / "checkpoints")
    run_dir = submit_and_kill(root, "nightly", [out, *APP_ARGS], after_stage="clean",
                              submit_options=("--checkpoint-root", checkpoints))
    result = run_cli("resume", "nightly", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == reference

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
        "0002-cli-000000.jsonl", "0002-driver-000000.jsonl"]
    assert SECRET.encode() not in all_bytes_under(run_dir)


@pytest.mark.e2e
def test_an_s3_outage_mid_run_is_survived_recorded_and_planned_around(tmp_path, s3, reference):
    root, out = s3.prefix, str(tmp_path / "out")
    run_dir = storage.join(root, "outage")
    process = subprocess.Popen(
        sparkrecover_command("submit", "--root", root, "--run-id", "outage", "--checkpoint-root",
                             str(tmp_path / "checkpoints"), "--", *SPARK_OPTIONS, PIPELINE, out, *APP_ARGS),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # botocore would otherwise retry a refused connection for ~8 s inside one request
        env={**os.environ, "AWS_MAX_ATTEMPTS": "1"})
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
    assert open(os.path.join(out, "report.txt")).read() == reference
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
        ("orders", "skip"), ("clean", "skip"), ("daily", "skip"), ("publish", "skip")]
    inspected = orjson.loads(run_cli("inspect", "outage", "--root", root, "--json").stdout)
    assert inspected["journal_degraded"] == len(gaps)


# -- end to end: checkpoints written by Spark to s3a://, verified by the CLI at s3:// ---------------

def s3a_jars() -> list[str]:
    folder = os.environ.get("SPARKRECOVER_S3A_JARS") or os.path.join(sys.prefix, "s3a-jars")
    return sorted(glob.glob(os.path.join(folder, "*.jar")))


def s3a_options(endpoint: str) -> list[str]:
    """Spark's side of the same S3 (README, "Journal on S3"). The numeric timeouts and the SDK v1
    credentials provider are what hadoop-aws 3.3.1 needs under pyspark 4's Hadoop 3.5 defaults."""
    conf = {
        "fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
        "fs.s3a.threads.keepalivetime": "60", "fs.s3a.connection.timeout": "200000",
        "fs.s3a.connection.establish.timeout": "30000", "fs.s3a.multipart.purge.age": "86400",
        "fs.s3a.connection.ttl": "300000", "fs.s3a.connection.idle.time": "60000",
        "fs.s3a.retry.interval": "500", "fs.s3a.retry.throttle.interval": "100",
    }
    options = ["--jars", ",".join(s3a_jars())]
    for key, value in conf.items():
        options += ["--conf", f"spark.hadoop.{key}={value}"]
    return options


@pytest.mark.e2e
@pytest.mark.skipif(not s3a_jars(), reason="no hadoop-aws jars: run scripts/fetch_s3a_jars.py (setup.sh test does)")
def test_s3a_checkpoints_are_verified_at_s3_and_skipped_on_resume(tmp_path, s3, reference):
    root, out = s3.prefix + "/runs", str(tmp_path / "out")
    checkpoints = s3.prefix + "/data"
    run_dir = submit_and_kill(root, "lake", [out, *APP_ARGS], after_stage="clean",
                              submit_options=("--checkpoint-root", checkpoints),
                              spark_options=tuple(s3a_options(s3.endpoint)))
    committed = {e["stage"]: e for e in events_of(run_dir) if e["type"] == "stage.committed"}
    output = committed["orders"]["manifest"][0]
    assert output["path"] == checkpoints + "/lake/orders"
    assert output["spark_path"] == "s3a" + checkpoints[2:] + "/lake/orders"
    assert output["file_count"] > 0 and output["success"] is True

    plan = run_cli("resume", "lake", "--root", root, "--dry-run", "--json")
    assert [(s["stage"], s["decision"]) for s in orjson.loads(plan.stdout)["stages"]][:2] == [
        ("orders", "skip"), ("clean", "skip")]
    result = run_cli("resume", "lake", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert open(os.path.join(out, "report.txt")).read() == reference
    second = [e for e in events_of(run_dir) if e["attempt"] == 2]
    assert {e["stage"] for e in second if e["type"] == "stage.skipped"} == {"orders", "clean"}
    fs = fsspec.filesystem("s3")
    fs.invalidate_cache()
    assert fs.find(checkpoints[len("s3://"):] + "/lake/daily")  # Spark wrote it, s3fs sees it
