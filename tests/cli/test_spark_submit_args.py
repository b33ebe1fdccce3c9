"""``sparkrecover spark-submit-args``: what another launcher is given, built as submit builds it."""

from __future__ import annotations

import os
import shlex

import orjson
import pytest

from sparkrecover.launch import launcher
from tests.helpers import fake_executable


@pytest.fixture
def app(tmp_path, monkeypatch):
    (tmp_path / "etl.py").write_text("print('never run here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARKRECOVER_NO_JVM_LISTENER", "1")  # no jar: the listener falls back to Py4J
    return "etl.py"


def test_the_line_is_what_submit_would_launch_without_an_attempt_or_a_token(cli, tmp_path, app):
    code, out, err = cli(
        "spark-submit-args", "--root", "runs", "--run-id", "nightly", "--flush-interval", "0.5", "--checksums",
        "--", "--master", "local[2]", app, "--day", "2026-11-21",
    )  # fmt: skip
    assert code == 0, err
    argv = shlex.split(out)
    parsed = launcher.split_submit_args(argv)
    assert parsed.app == launcher.BOOTSTRAP
    run_dir = str(tmp_path / "runs" / "nightly")
    assert parsed.app_args == [
        "--run-dir", run_dir, "--run-id", "nightly", "--flush-interval", "0.5", "--buffer-size", "1048576",
        "--checksums", "--listener", "py4j", "--", str(tmp_path / "etl.py"), "--day", "2026-11-21",
    ]  # fmt: skip
    assert parsed.master == "local[2]"
    # The driver (and, on a local master, its workers) on this Python, which imports sparkrecover.
    assert parsed.conf("spark.pyspark.driver.python") == launcher.sys.executable
    assert "--attempt" not in argv and "--lease-token" not in argv


def test_json_maps_onto_a_launchers_fields(cli, app):
    code, out, err = cli("spark-submit-args", "--root", "runs", "--run-id", "n1", "--json", "--", app)
    assert code == 0, err
    document = orjson.loads(out)
    assert sorted(document) == ["application", "arguments", "argv", "conf", "files", "jars", "py_files"]
    assert document["application"] == launcher.BOOTSTRAP
    assert document["argv"][document["argv"].index(document["application"]) + 1 :] == document["arguments"]
    assert document["arguments"][-2:] == ["--", os.path.abspath(app)]
    # No master given: which Python the driver runs on and whether map outputs are kept for free
    # depend on it, so neither is set, and stderr says why.
    assert document["conf"] == {}
    assert "shuffle map outputs are not kept" in err


def test_a_local_root_with_cluster_deploy_mode_is_refused_as_submit_refuses_it(cli, app):
    code, out, err = cli(
        "spark-submit-args",
        "--root",
        "runs",
        "--run-id",
        "n1",
        "--",
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
        app,
    )
    assert (code, out) == (2, "")
    assert "--deploy-mode cluster needs --root on shared storage" in err


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--json", "--", "etl.py"], "missing option '--run-id'"),
        (["--run-id", "n1", "--", "job.jar"], "JVM applications are not supported yet"),
        (["--run-id", "../x", "--", "etl.py"], "invalid run id"),
        (["--run-id", "n1", "--keep-shuffles", "always", "--", "etl.py"], "--keep-shuffles always: expected one of"),
        (["--run-id", "n1", "--dry-run", "--", "etl.py"], "no such option --dry-run: it is an option of resume"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, app, given, said):
    code, out, err = cli("spark-submit-args", *given)
    assert (code, out) == (2, ""), err
    assert len(err.strip().splitlines()) == 1 and said in err


def test_the_listeners_jar_is_handed_on_when_a_jdk_builds_it(cli, tmp_path, app, monkeypatch):
    jar = tmp_path / "listener.jar"
    jar.write_bytes(b"PK")
    monkeypatch.delenv("SPARKRECOVER_NO_JVM_LISTENER")
    from sparkrecover.launch import listener_jar

    monkeypatch.setattr(
        listener_jar, "ensure_jar", lambda spark_submit: listener_jar.ListenerJar(str(jar), None, False)
    )
    fake = fake_executable(tmp_path / "bin" / "spark-submit")
    code, out, err = cli("spark-submit-args", "--run-id", "n1", "--spark-submit", fake, "--json", "--", app)
    assert code == 0, err
    document = orjson.loads(out)
    assert document["jars"] == [str(jar)]
    assert document["conf"]["spark.extraListeners"] == "sparkrecover.jvm.SparkRecoverListener"
    assert document["arguments"][document["arguments"].index("--listener") + 1] == "jvm"
