"""Launching spark-submit, merging options, redaction, the lease and exit-code plumbing (DESIGN §7-8).

No Spark here: the plumbing tests use fake spark-submit shell scripts.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import orjson
import pytest

from sparkrecover.errors import LaunchError, LeaseHeldError, UsageError
from sparkrecover.journal import read_journal
from sparkrecover.launch import attempts, redact
from sparkrecover.launch import spark_submit as launcher
from sparkrecover.rundir import lease as leases
from tests.helpers import sparkrecover_command


def fake_executable(path, body="exit 0") -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return str(path)


# -- split_submit_args / check_application --------------------------------------------------------

def test_split_options_app_and_app_args():
    parsed = launcher.split_submit_args([
        "--master", "local[2]", "--conf", "spark.x=1", "-c", "spark.y=2", "--verbose", "--supervise",
        "--driver-memory=2g", "etl.py", "--day", "2026-01-01", "--conf", "not-for-spark", "--", "-v"])
    assert parsed.options == ["--master", "local[2]", "--conf", "spark.x=1", "-c", "spark.y=2", "--verbose",
                              "--supervise", "--driver-memory=2g"]
    assert parsed.app == "etl.py"
    assert parsed.app_args == ["--day", "2026-01-01", "--conf", "not-for-spark", "--", "-v"]


def test_split_skips_a_leading_double_dash():
    parsed = launcher.split_submit_args(["--", "--master", "yarn", "app.py", "x"])
    assert (parsed.options, parsed.app, parsed.app_args) == (["--master", "yarn"], "app.py", ["x"])


def test_option_and_conf_accessors():
    parsed = launcher.split_submit_args([
        "--master", "local", "--master=yarn", "--conf", "spark.submit.deployMode=cluster",
        "--conf", "spark.a= b=c", "app.py"])
    assert parsed.option("--master") == "yarn"
    assert parsed.master == "yarn"
    assert parsed.conf("spark.a") == " b=c"
    assert parsed.deploy_mode == "cluster"
    assert launcher.split_submit_args(["app.py"]).deploy_mode == "client"
    assert launcher.split_submit_args(["--deploy-mode", "cluster", "app.py"]).deploy_mode == "cluster"


@pytest.mark.parametrize("args, message", [
    ([], "no application given"),
    (["--master", "local[2]", "--verbose"], "no application given"),
    (["--master"], "--master needs a value"),
    (["--", "--conf"], "--conf needs a value"),
])
def test_missing_application_is_a_usage_error(args, message):
    with pytest.raises(UsageError, match=message) as caught:
        launcher.split_submit_args(args)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("args", [["app.jar"], ["--class", "com.example.Main", "app.py"],
                                  ["--class=com.example.Main", "app.py"]])
def test_jvm_applications_are_refused(tmp_path, args):
    (tmp_path / "app.py").write_text("")
    with pytest.raises(UsageError, match="JVM applications are not supported") as caught:
        launcher.check_application(launcher.split_submit_args(args))
    assert caught.value.exit_code == 2


def test_check_application(tmp_path):
    (tmp_path / "app.py").write_text("")
    launcher.check_application(launcher.split_submit_args(["app.py"]))
    launcher.check_application(launcher.split_submit_args(["--deploy-mode", "cluster", "missing.py"]))
    with pytest.raises(UsageError, match="no such file"):
        launcher.check_application(launcher.split_submit_args(["missing.py"]))
    with pytest.raises(UsageError, match="expected a Python script"):
        launcher.check_application(launcher.split_submit_args(["job.R"]))


# -- find_spark_submit ----------------------------------------------------------------------------

@pytest.fixture
def places(tmp_path, monkeypatch):
    """Fake spark-submits in a SPARK_HOME, on PATH and an explicit one; PATH holds nothing else."""
    home = tmp_path / "spark-home"
    found = {"home": fake_executable(home / "bin" / "spark-submit"),
             "path": fake_executable(tmp_path / "on-path" / "spark-submit"),
             "explicit": fake_executable(tmp_path / "mine" / "my-submit")}
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "on-path"))
    return found


def test_explicit_spark_submit_comes_first(places, monkeypatch, tmp_path):
    assert launcher.find_spark_submit(places["explicit"]) == places["explicit"]
    monkeypatch.chdir(tmp_path / "mine")
    assert launcher.find_spark_submit("./my-submit") == places["explicit"]  # made absolute
    assert launcher.find_spark_submit("spark-submit") == places["path"]  # a name is looked up on PATH
    with pytest.raises(LaunchError, match="not found or not executable"):
        launcher.find_spark_submit(str(tmp_path / "absent"))


def test_spark_home_then_path_then_pyspark(places, monkeypatch, tmp_path):
    import pyspark

    assert launcher.find_spark_submit() == places["home"]
    os.chmod(places["home"], 0o644)  # not executable: skipped
    assert launcher.find_spark_submit() == places["path"]
    monkeypatch.delenv("SPARK_HOME")
    assert launcher.find_spark_submit() == places["path"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert launcher.find_spark_submit() == os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")


def test_no_spark_submit_anywhere_is_a_launch_error(monkeypatch, tmp_path):
    import importlib.util

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(LaunchError, match="spark-submit not found"):
        launcher.find_spark_submit()


# -- the command line and environment of the driver -------------------------------------------------

def test_bootstrap_command_client_mode(tmp_path):
    parsed = launcher.split_submit_args(["--master", "local[2]", "app.py", "--day", "1"])
    assert launcher.bootstrap_command("/x/spark-submit", parsed, ["--run-id", "r1"]) == [
        "/x/spark-submit", "--master", "local[2]", launcher.BOOTSTRAP, "--run-id", "r1", "--",
        str(tmp_path / "app.py"), "--day", "1"]
    assert os.path.isfile(launcher.BOOTSTRAP)


def test_bootstrap_command_cluster_mode_ships_the_script():
    parsed = launcher.split_submit_args(["--deploy-mode", "cluster", "--files", "a.txt", "jobs/app.py", "x"])
    assert launcher.bootstrap_command("ss", parsed, []) == [
        "ss", "--deploy-mode", "cluster", "--files", "a.txt,jobs/app.py", launcher.BOOTSTRAP, "--", "app.py", "x"]
    parsed = launcher.split_submit_args(["--deploy-mode", "cluster", "jobs/app.py"])
    assert launcher.bootstrap_command("ss", parsed, [])[:5] == ["ss", "--deploy-mode", "cluster", "--files",
                                                                "jobs/app.py"]


def test_child_environment(monkeypatch):
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    env = launcher.child_environment(launcher.split_submit_args(["app.py"]))
    assert (env["PYSPARK_DRIVER_PYTHON"], env["PYSPARK_PYTHON"]) == (sys.executable, sys.executable)
    env = launcher.child_environment(launcher.split_submit_args(["--master", "yarn", "app.py"]))
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable and "PYSPARK_PYTHON" not in env
    env = launcher.child_environment(launcher.split_submit_args(
        ["--conf", "spark.pyspark.driver.python=/opt/py", "app.py"]))
    assert "PYSPARK_DRIVER_PYTHON" not in env
    env = launcher.child_environment(launcher.split_submit_args(["--deploy-mode", "cluster", "app.py"]))
    assert "PYSPARK_DRIVER_PYTHON" not in env and "PYSPARK_PYTHON" not in env
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/usr/bin/python-of-my-choice")
    env = launcher.child_environment(launcher.split_submit_args(["app.py"]))
    assert env["PYSPARK_DRIVER_PYTHON"] == "/usr/bin/python-of-my-choice"


def test_merge_options():
    recorded = ["--master", "yarn", "--conf", "spark.a=1", "--conf", "spark.b=2", "--executor-memory", "4g",
                "--verbose"]
    assert attempts.merge_options(recorded, []) == recorded
    assert attempts.merge_options(recorded, ["--conf", "spark.a=9", "--executor-memory", "8g"]) == [
        "--master", "yarn", "--conf", "spark.b=2", "--verbose", "--conf", "spark.a=9", "--executor-memory", "8g"]
    assert attempts.merge_options(recorded, ["--executor-memory=16g", "--conf", "spark.c=3"]) == [
        "--master", "yarn", "--conf", "spark.a=1", "--conf", "spark.b=2", "--verbose",
        "--executor-memory=16g", "--conf", "spark.c=3"]


# -- redaction (rule 9) ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--conf", "spark.db.password=hunter2"], ["--conf", "spark.db.password=*****"]),
    (["--conf", "spark.hadoop.fs.s3a.secret.key=abc"], ["--conf", "spark.hadoop.fs.s3a.secret.key=*****"]),
    (["--conf", "spark.hadoop.fs.s3a.access.key=AKIA"], ["--conf", "spark.hadoop.fs.s3a.access.key=*****"]),
    (["--conf", "spark.hadoop.fs.s3a.session.token=t"], ["--conf", "spark.hadoop.fs.s3a.session.token=*****"]),
    (["-c", "my.Credential=c"], ["-c", "my.Credential=*****"]),
    (["--conf", "AWS_ACCESS_KEY_ID=x"], ["--conf", "AWS_ACCESS_KEY_ID=*****"]),
    (["--db-password=x"], ["--db-password=*****"]),
    (["--API-TOKEN", "x", "--day", "1"], ["--API-TOKEN", "*****", "--day", "1"]),
    (["--session_key", "k"], ["--session_key", "*****"]),
    (["--master", "local[2]", "--conf", "spark.executor.memory=4g", "--name=etl", "app.py", "pass"],
     ["--master", "local[2]", "--conf", "spark.executor.memory=4g", "--name=etl", "app.py", "pass"]),
])
def test_redact_args(args, expected):
    assert redact.redact_args(args) == expected


def test_redact_mapping_and_has_redacted():
    assert redact.redact_mapping({"DB_PASSWORD": "x", "HOME": "/root", "GITHUB_TOKEN": "t"}) == {
        "DB_PASSWORD": "*****", "HOME": "/root", "GITHUB_TOKEN": "*****"}
    assert redact.has_redacted(["--conf", "a.secret=*****", "--token", "*****", "x"]) == ["a.secret=*****", "*****"]


# -- the lease ------------------------------------------------------------------------------------

def write_lease(run_dir, **fields):
    os.makedirs(run_dir, exist_ok=True)
    document = {"run": "r1", "host": socket.gethostname(), "pid": os.getpid(), "user": "someone",
                "token": "theirs", "ttl_s": 30.0, "heartbeat": "2026-01-01T00:00:00.000Z",
                "heartbeat_epoch": time.time(), **fields}
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps(document))
    return document


def test_lease_acquire_and_release(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(run_dir, "r1").acquire()
    try:
        held = leases.read_lease(run_dir)
        assert (held["host"], held["pid"], held["run"]) == (socket.gethostname(), os.getpid(), "r1")
        assert abs(held["heartbeat_epoch"] - time.time()) < 3600
        assert held["heartbeat"].endswith("Z") and lease.took_over is None
        assert leases.is_live(held)
        with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}") as caught:
            leases.Lease(run_dir, "r1").acquire()
        assert caught.value.exit_code == 4
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
    leases.Lease(run_dir, "r1").acquire().release()  # free again


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("stale", [{"pid": "dead"}, {"heartbeat_epoch": time.time() - 3600}])
def test_a_stale_lease_is_taken_over(tmp_path, stale):
    run_dir = str(tmp_path / "r1")
    if stale.get("pid") == "dead":
        stale = {"pid": dead_pid()}
    old = write_lease(run_dir, **stale)
    assert not leases.is_live(old)
    lease = leases.Lease(run_dir, "r1").acquire()
    try:
        assert lease.took_over == old
        assert leases.read_lease(run_dir)["token"] == lease.token
    finally:
        lease.release()
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))


def test_a_fresh_lease_of_another_host_is_live(tmp_path):
    run_dir = str(tmp_path / "r1")
    write_lease(run_dir, host="some-other-host", pid=1)
    with pytest.raises(LeaseHeldError, match="some-other-host"):
        leases.Lease(run_dir, "r1").acquire()


def test_release_leaves_a_lease_taken_over_by_someone_else(tmp_path):
    run_dir = str(tmp_path / "r1")
    lease = leases.Lease(run_dir, "r1").acquire()
    theirs = write_lease(run_dir, token="someone-else")
    lease.release()
    assert leases.read_lease(run_dir) == theirs


# -- exit-code plumbing with a fake spark-submit ---------------------------------------------------

@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    return "app.py"


def attempt_ended(run_dir):
    return [r for r in read_journal(run_dir) if r["type"] == "attempt.ended"]


def test_application_exit_code_is_passed_through(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", f'printf "%s\\n" "$@" > {tmp_path}/argv\nexit 7')
    code, out, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--",
                         "--master", "local[2]", "--conf", "spark.db.password=hunter2", app, "--day", "1")
    assert code == 7, err
    run_dir = str(tmp_path / "runs" / "r1")
    assert [(r["exit_code"], r["signal"]) for r in attempt_ended(run_dir)] == [(7, None)]
    argv = (tmp_path / "argv").read_text().splitlines()
    at = argv.index(launcher.BOOTSTRAP)
    assert argv[:4] == ["--master", "local[2]", "--conf", "spark.db.password=hunter2"]
    # Between the user's options and the bootstrap: only the JVM listener's registration, if any.
    added = argv[4:at]
    assert added == [] or (added[0] == "--jars" and added[2:] == [
        "--conf", f"spark.extraListeners={launcher.LISTENER_CLASS}"]), added
    assert argv[-4:] == ["--", str(tmp_path / "app.py"), "--day", "1"]
    assert ["--run-dir", run_dir] == argv[at + 1:at + 3]
    journal = b"".join((tmp_path / "runs" / "r1" / "journal" / name).read_bytes()
                       for name in os.listdir(tmp_path / "runs" / "r1" / "journal"))
    assert b"hunter2" not in journal  # rule 9
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
    assert "sparkrecover resume r1" in " ".join(err.split())


def test_death_by_signal_exits_128_plus_n(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", "kill -9 $$")
    code, _, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", app)
    assert code == 137, err
    assert [(r["exit_code"], r["signal"]) for r in attempt_ended(str(tmp_path / "runs" / "r1"))] == [(137, 9)]


def test_sigterm_is_forwarded_to_the_driver(tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", f"""
trap 'echo term > {tmp_path}/term; exit 143' TERM
sleep 0.5
echo up > {tmp_path}/started
while true; do sleep 0.05; done""")
    process = subprocess.Popen(sparkrecover_command("submit", "--root", "runs", "--run-id", "r1",
                                                    "--spark-submit", fake, "--", app),
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, err
    assert (tmp_path / "term").read_text() == "term\n"
    assert [(r["exit_code"], r["signal"]) for r in attempt_ended(str(tmp_path / "runs" / "r1"))] == [(143, 15)]
    assert "Traceback" not in err


def test_a_jar_is_refused_with_one_line(cli, tmp_path):
    (tmp_path / "app.jar").write_bytes(b"PK")
    code, out, err = cli("submit", "--", "app.jar")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "JVM applications are not supported" in err
    assert "Traceback" not in err
    assert not (tmp_path / ".sparkrecover").exists()


def test_errors_stay_on_one_line_on_a_narrow_or_non_terminal_stderr(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS")  # what CI and cron see: stderr is no terminal, rich assumes 80
    code, _, err = cli("submit", "--", "app.jar")
    assert code == 2
    # BUG: sparkrecover/render.py:35 error() prints through a rich Console that wraps at the
    # console width (80 when stderr is no terminal), so one-line errors (cli.py:118 promises "one
    # line") are split across lines in logs, and long file:line locations get broken up.
    assert len(err.splitlines()) == 1, err


def test_cluster_mode_with_a_local_root_is_refused(cli, tmp_path, app):
    code, out, err = cli("submit", "--", "--deploy-mode", "cluster", app)
    assert (code, out) == (2, "")
    assert "shared storage" in " ".join(err.split())


def test_submit_of_a_finished_run_id_is_a_safe_no_op(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", f"echo ran >> {tmp_path}/launches\nexit 0")
    first = cli("submit", "--root", "runs", "--run-id", "nightly", "--spark-submit", fake, "--", app)
    assert first[0] == 0, first
    code, _, err = cli("submit", "--root", "runs", "--run-id", "nightly", "--spark-submit", fake, "--", app)
    # BUG: sparkrecover/recovery.py:41 raises UsageError (exit 2) for any existing run id, but
    # DESIGN §8 says `submit --run-id ID` of a succeeded run prints that it is complete and exits
    # 0 without launching (and resumes an unfinished one), so one cron line is safe to repeat.
    assert code == 0, err
    assert (tmp_path / "launches").read_text() == "ran\n"
