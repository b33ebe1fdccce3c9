"""Running attempts: merging recorded options, and exit-code plumbing with a fake spark-submit (docs/design.md §7-8)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from sparkrecover.journal import read_journal
from sparkrecover.jvm import LISTENER_CLASS
from sparkrecover.launch import attempts, launcher
from tests.helpers import fake_executable, sparkrecover_command


def test_merge_options():
    recorded = [
        "--master",
        "yarn",
        "--conf",
        "spark.a=1",
        "--conf",
        "spark.b=2",
        "--executor-memory",
        "4g",
        "--verbose",
    ]
    assert attempts.merge_options(recorded, []) == recorded
    assert attempts.merge_options(recorded, ["--conf", "spark.a=9", "--executor-memory", "8g"]) == [
        "--master",
        "yarn",
        "--conf",
        "spark.b=2",
        "--verbose",
        "--conf",
        "spark.a=9",
        "--executor-memory",
        "8g",
    ]
    assert attempts.merge_options(recorded, ["--executor-memory=16g", "--conf", "spark.c=3"]) == [
        "--master",
        "yarn",
        "--conf",
        "spark.a=1",
        "--conf",
        "spark.b=2",
        "--verbose",
        "--executor-memory=16g",
        "--conf",
        "spark.c=3",
    ]


# -- exit-code plumbing with a fake spark-submit ---------------------------------------------------


@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    return "app.py"


def attempt_ended(run_dir):
    return [r for r in read_journal(run_dir) if r["type"] == "attempt.ended"]


def test_application_exit_code_is_passed_through(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", f'printf "%s\\n" "$@" > {tmp_path}/argv\nexit 7')
    code, _out, err = cli(
        "submit",
        "--root",
        "runs",
        "--run-id",
        "r1",
        "--spark-submit",
        fake,
        "--",
        "--master",
        "local[2]",
        "--conf",
        "spark.db.password=hunter2",
        app,
        "--day",
        "1",
    )
    assert code == 7, err
    run_dir = str(tmp_path / "runs" / "r1")
    assert [(r["exit_code"], r["signal"]) for r in attempt_ended(run_dir)] == [(7, None)]
    argv = (tmp_path / "argv").read_text().splitlines()
    at = argv.index(launcher.BOOTSTRAP)
    assert argv[:4] == ["--master", "local[2]", "--conf", "spark.db.password=hunter2"]
    # Between the user's options and the bootstrap: only the JVM listener's registration, if any,
    # and the settings that keep shuffle map outputs (launch/shuffles.py).
    added = argv[4:at]
    keeping = ("spark.shuffle.manager=", "spark.sparkrecover.shuffle.", "spark.plugins=")
    kept = [i for i in range(len(added) - 1) if added[i] == "--conf" and added[i + 1].startswith(keeping)]
    added = [item for i, item in enumerate(added) if not any(i in (k, k + 1) for k in kept)]
    assert added == [] or (
        added[0] == "--jars" and added[2:] == ["--conf", f"spark.extraListeners={LISTENER_CLASS}"]
    ), added
    assert argv[-4:] == ["--", str(tmp_path / "app.py"), "--day", "1"]
    assert ["--run-dir", run_dir] == argv[at + 1 : at + 3]
    journal = b"".join(
        (tmp_path / "runs" / "r1" / "journal" / name).read_bytes()
        for name in os.listdir(tmp_path / "runs" / "r1" / "journal")
    )
    assert b"hunter2" not in journal  # rule 9
    assert not os.path.exists(os.path.join(run_dir, "lease.json"))
    assert "sparkrecover resume r1" in " ".join(err.split())


def test_death_by_signal_exits_128_plus_n(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "fake-submit", "kill -9 $$")
    code, _, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", app)
    assert code == 137, err
    assert [(r["exit_code"], r["signal"]) for r in attempt_ended(str(tmp_path / "runs" / "r1"))] == [(137, 9)]


def test_sigterm_is_forwarded_to_the_driver(tmp_path, app):
    fake = fake_executable(
        tmp_path / "fake-submit",
        f"""
trap 'echo term > {tmp_path}/term; exit 143' TERM
sleep 0.5
echo up > {tmp_path}/started
while true; do sleep 0.05; done""",
    )
    process = subprocess.Popen(
        sparkrecover_command("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", app),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
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
    # docs/design.md §8: `submit --run-id ID` of a succeeded run says it is complete and launches nothing,
    # so one cron line is safe to repeat.
    assert code == 0, err
    assert (tmp_path / "launches").read_text() == "ran\n"


def test_max_attempts_counts_every_attempt_of_this_invocation(cli, tmp_path, app):
    # Counting only: the fake leaves no driver journal, so no attempt can be judged stuck.
    fake = fake_executable(tmp_path / "fake-submit", f"echo ran >> {tmp_path}/launches\nexit 1")
    code, _, err = cli(
        "submit", "--root", "runs", "--run-id", "r1", "--max-attempts", "3", "--spark-submit", fake, "--", app
    )
    assert code == 1, err
    assert (tmp_path / "launches").read_text().count("ran") == 3
    code, _, err = cli("resume", "r1", "--root", "runs", "--max-attempts", "2")
    assert code == 1, err
    assert (tmp_path / "launches").read_text().count("ran") == 5
    code, _, err = cli(
        "submit", "--root", "runs", "--run-id", "r1", "--max-attempts", "2", "--spark-submit", fake, "--", app
    )
    assert code == 1, err
    assert (tmp_path / "launches").read_text().count("ran") == 7
    assert [r["exit_code"] for r in attempt_ended(str(tmp_path / "runs" / "r1"))] == [1] * 7
