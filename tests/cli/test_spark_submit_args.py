"""``sparkrecover spark-submit-args``: what another launcher is given, built as submit builds it."""

from __future__ import annotations

import os
import shlex

import orjson
import pytest

from sparkrecover.jvm import SHUFFLE_DIR_CONF, SHUFFLE_MANAGER_CLASS, SHUFFLE_MANAGER_CONF
from sparkrecover.launch import launcher, spark_argv
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
    parsed = spark_argv.split_submit_args(argv)
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
    # No master given: the Python the driver runs on is left to the launcher, which may give one,
    # and stderr says that nothing is kept for want of a master.
    assert document["conf"] == {}
    assert "no --master after -- and no spark.master in spark-defaults.conf" in err


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
    from sparkrecover.launch.jvm_files import listener_jar

    monkeypatch.setattr(
        listener_jar, "ensure_jar", lambda spark_submit: listener_jar.ListenerJar(str(jar), None, False)
    )
    fake = fake_executable(tmp_path / "bin" / "spark-submit")
    code, out, err = cli("spark-submit-args", "--run-id", "n1", "--spark-submit", fake, "--json", "--", app)
    assert code == 0, err
    document = orjson.loads(out)
    assert document["jars"] == [str(jar)]
    assert document["conf"]["spark.extraListeners"] == "sparkrecover.jvm.bridge.SparkRecoverListener"
    assert document["arguments"][document["arguments"].index("--listener") + 1] == "jvm"


@pytest.fixture
def jar(tmp_path, app, monkeypatch):
    """A listener jar built for Spark ``jar.version`` (set it before the call), and a fake
    spark-submit whose Spark home (its bin folder's parent) has a conf folder for the test to fill."""
    built = tmp_path / "listener.jar"
    built.write_bytes(b"PK")
    monkeypatch.delenv("SPARKRECOVER_NO_JVM_LISTENER")
    for name in ("SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    from sparkrecover.launch.jvm_files import listener_jar

    state = {"version": "4.0.1-scala2.13"}
    monkeypatch.setattr(
        listener_jar,
        "ensure_jar",
        lambda spark_submit: listener_jar.ListenerJar(str(built), None, False, spark_version=state["version"]),
    )
    home = tmp_path / "spark"
    (home / "conf").mkdir(parents=True)
    state.update(path=str(built), spark_submit=fake_executable(home / "bin" / "spark-submit"), home=home)
    return state


def handed(cli, jar, *options: str) -> tuple[dict, str]:
    code, out, err = cli(
        "spark-submit-args", "--run-id", "n1", "--spark-submit", jar["spark_submit"], *options, "--json", "--", "etl.py"
    )
    assert code == 0, err
    return orjson.loads(out), err


def test_with_no_master_anywhere_auto_keeps_nothing_and_says_to_give_the_master_after_dashes(cli, jar):
    """No --master after -- and no spark.master in spark-defaults.conf: the master is the one a
    launcher puts before the line (Airflow's SparkSubmitOperator does), or local[*] when none does,
    which cannot be told apart here. auto keeps nothing rather than guess (a cluster's executors
    would look for links on the driver's disk) and says what to do."""
    document, err = handed(cli, jar)
    assert "spark.shuffle.manager" not in document["conf"]
    assert "no --master after -- and no spark.master in spark-defaults.conf" in err
    assert "give the master after --" in err and "local master only" not in err
    assert "spark.pyspark.python" not in document["conf"]  # a launcher's own --master may still come first


def test_with_no_master_anywhere_an_explicit_copy_puts_the_jar_on_spark_35_executors_class_path(cli, jar):
    """--keep-shuffles copy with no master known: a launcher's cluster master may come first, so
    Spark 3.5's executors get the jar on their class path (ignored on a local master)."""
    jar["version"] = "3.5.3-scala2.12"
    document, err = handed(cli, jar, "--keep-shuffles", "copy")
    assert document["conf"]["spark.shuffle.manager"] == "sparkrecover.jvm.shuffle.KeepingShuffleManager", err
    assert document["conf"]["spark.executor.extraClassPath"] == jar["path"], err


def test_with_no_master_after_dashes_auto_decides_for_the_master_of_spark_defaults(cli, jar):
    defaults = jar["home"] / "conf" / "spark-defaults.conf"
    defaults.write_text("# the cluster's\nspark.master   spark://head:7077\n")
    document, err = handed(cli, jar)
    assert "spark.shuffle.manager" not in document["conf"]
    assert f"--keep-shuffles auto decided for spark://head:7077, the master spark-submit takes from {defaults}" in err
    assert "keeps nothing with a local run directory on a cluster (spark://head:7077)" in err


def test_a_cluster_master_from_spark_defaults_still_puts_the_jar_on_spark_35_executors_class_path(cli, jar):
    """Spark 3.5's executors create their shuffle manager before they fetch --jars: a master taken
    from spark-defaults.conf is a cluster's like one given with --master."""
    jar["version"] = "3.5.3-scala2.12"
    (jar["home"] / "conf" / "spark-defaults.conf").write_text("spark.master=yarn\n")
    document, err = handed(cli, jar, "--keep-shuffles", "copy")
    assert document["conf"]["spark.executor.extraClassPath"] == jar["path"], err


def test_the_line_is_printed_without_making_the_run_directory_or_its_keep_folder(cli, jar, tmp_path):
    """Printing a line changes nothing on storage: the keeping shuffle manager makes the keep
    folder when it keeps a map output, so neither an empty ``<run>/shuffles`` nor the run's folder
    appears on every call, nor for a run that already succeeded (whose keep folder is gone)."""
    document, err = handed(cli, jar, "--keep-shuffles", "copy")
    assert document["conf"][SHUFFLE_MANAGER_CONF] == SHUFFLE_MANAGER_CLASS, err
    keep = document["conf"][SHUFFLE_DIR_CONF]
    assert keep == str(tmp_path / ".sparkrecover" / "n1" / "shuffles")
    assert not (tmp_path / ".sparkrecover").exists()
