"""Finding spark-submit, splitting its arguments, and the driver's command line and environment (docs/design.md §7).

No Spark here: fake spark-submit shell scripts stand in for it.
"""

from __future__ import annotations

import os
import sys

import pytest

from sparkrecover.errors import LaunchError, UsageError
from sparkrecover.launch import launcher, spark_argv, spark_log
from tests.helpers import fake_executable

# -- split_submit_args / check_application --------------------------------------------------------


def test_split_options_app_and_app_args():
    parsed = spark_argv.split_submit_args(
        [
            "--master",
            "local[2]",
            "--conf",
            "spark.x=1",
            "-c",
            "spark.y=2",
            "--verbose",
            "--supervise",
            "--driver-memory=2g",
            "etl.py",
            "--day",
            "2026-01-01",
            "--conf",
            "not-for-spark",
            "--",
            "-v",
        ]
    )
    assert parsed.options == [
        "--master",
        "local[2]",
        "--conf",
        "spark.x=1",
        "-c",
        "spark.y=2",
        "--verbose",
        "--supervise",
        "--driver-memory=2g",
    ]
    assert parsed.app == "etl.py"
    assert parsed.app_args == ["--day", "2026-01-01", "--conf", "not-for-spark", "--", "-v"]


def test_split_skips_a_leading_double_dash():
    parsed = spark_argv.split_submit_args(["--", "--master", "yarn", "app.py", "x"])
    assert (parsed.options, parsed.app, parsed.app_args) == (["--master", "yarn"], "app.py", ["x"])


def test_option_and_conf_accessors():
    parsed = spark_argv.split_submit_args(
        [
            "--master",
            "local",
            "--master=yarn",
            "--conf",
            "spark.submit.deployMode=cluster",
            "--conf",
            "spark.a= b=c",
            "app.py",
        ]
    )
    assert parsed.option("--master") == "yarn"
    assert parsed.master == "yarn"
    assert parsed.conf("spark.a") == " b=c"
    assert parsed.deploy_mode == "cluster"
    assert spark_argv.split_submit_args(["app.py"]).deploy_mode == "client"
    assert spark_argv.split_submit_args(["--deploy-mode", "cluster", "app.py"]).deploy_mode == "cluster"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "no application given"),
        (["--master", "local[2]", "--verbose"], "no application given"),
        (["--master"], "--master needs a value"),
        (["--", "--conf"], "--conf needs a value"),
    ],
)
def test_missing_application_is_a_usage_error(args, message):
    with pytest.raises(UsageError, match=message) as caught:
        spark_argv.split_submit_args(args)
    assert caught.value.exit_code == 2


def test_unknown_options_are_those_before_the_application_spark_submit_does_not_know():
    assert (
        spark_argv.unknown_options(
            [
                "--master",
                "yarn",
                "--conf=a=b",
                "-c",
                "x=1",
                "-v",
                "--driver-memory=2g",
                "--driver-java-options",
                "-Dx",
                "app.py",
                "--bogus",
            ]
        )
        == []
    )
    assert spark_argv.unknown_options(["--run-idd", "x", "app.py"]) == ["--run-idd"]
    assert spark_argv.unknown_options(["--", "--max-attempt=2", "-x", "app.py", "--y"]) == ["--max-attempt=2", "-x"]


@pytest.mark.parametrize(
    "args", [["app.jar"], ["--class", "com.example.Main", "app.py"], ["--class=com.example.Main", "app.py"]]
)
def test_jvm_applications_are_refused(tmp_path, args):
    (tmp_path / "app.py").write_text("")
    with pytest.raises(UsageError, match="JVM applications are not supported") as caught:
        spark_argv.check_application(spark_argv.split_submit_args(args))
    assert caught.value.exit_code == 2


def test_check_application(tmp_path):
    (tmp_path / "app.py").write_text("")
    spark_argv.check_application(spark_argv.split_submit_args(["app.py"]))
    spark_argv.check_application(spark_argv.split_submit_args(["--deploy-mode", "cluster", "missing.py"]))
    with pytest.raises(UsageError, match="no such file"):
        spark_argv.check_application(spark_argv.split_submit_args(["missing.py"]))
    with pytest.raises(UsageError, match="expected a Python script"):
        spark_argv.check_application(spark_argv.split_submit_args(["job.R"]))


# -- find_spark_submit ----------------------------------------------------------------------------


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Fake spark-submits in a SPARK_HOME, on PATH and an explicit one; PATH holds nothing else."""
    home = tmp_path / "spark-home"
    found = {
        "home": fake_executable(home / "bin" / "spark-submit"),
        "path": fake_executable(tmp_path / "on-path" / "spark-submit"),
        "explicit": fake_executable(tmp_path / "mine" / "my-submit"),
    }
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
    parsed = spark_argv.split_submit_args(["--master", "local[2]", "app.py", "--day", "1"])
    assert launcher.bootstrap_command("/x/spark-submit", parsed, ["--run-id", "r1"]) == [
        "/x/spark-submit",
        "--master",
        "local[2]",
        launcher.BOOTSTRAP,
        "--run-id",
        "r1",
        "--",
        str(tmp_path / "app.py"),
        "--day",
        "1",
    ]
    assert os.path.isfile(launcher.BOOTSTRAP)


def test_bootstrap_command_cluster_mode_ships_the_script():
    parsed = spark_argv.split_submit_args(["--deploy-mode", "cluster", "--files", "a.txt", "jobs/app.py", "x"])
    assert launcher.bootstrap_command("ss", parsed, []) == [
        "ss",
        "--deploy-mode",
        "cluster",
        "--files",
        "a.txt,jobs/app.py",
        launcher.BOOTSTRAP,
        "--",
        "app.py",
        "x",
    ]
    parsed = spark_argv.split_submit_args(["--deploy-mode", "cluster", "jobs/app.py"])
    assert launcher.bootstrap_command("ss", parsed, [])[:5] == [
        "ss",
        "--deploy-mode",
        "cluster",
        "--files",
        "jobs/app.py",
    ]


def test_child_environment(monkeypatch):
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    env = launcher.child_environment(spark_argv.split_submit_args(["app.py"]))
    assert (env["PYSPARK_DRIVER_PYTHON"], env["PYSPARK_PYTHON"]) == (sys.executable, sys.executable)
    env = launcher.child_environment(spark_argv.split_submit_args(["--master", "yarn", "app.py"]))
    assert env["PYSPARK_DRIVER_PYTHON"] == sys.executable and "PYSPARK_PYTHON" not in env
    env = launcher.child_environment(
        spark_argv.split_submit_args(["--conf", "spark.pyspark.driver.python=/opt/py", "app.py"])
    )
    assert "PYSPARK_DRIVER_PYTHON" not in env
    env = launcher.child_environment(spark_argv.split_submit_args(["--deploy-mode", "cluster", "app.py"]))
    assert "PYSPARK_DRIVER_PYTHON" not in env and "PYSPARK_PYTHON" not in env
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/usr/bin/python-of-my-choice")
    env = launcher.child_environment(spark_argv.split_submit_args(["app.py"]))
    assert env["PYSPARK_DRIVER_PYTHON"] == "/usr/bin/python-of-my-choice"


def quiet(env: dict[str, str]) -> bool:
    """Whether the driver was handed sparkrecover's log4j2 configuration."""
    opts = env.get("SPARK_SUBMIT_OPTS", "")
    return f"-Dlog4j2.configurationFile={spark_log.CONFIG}" in opts


def test_the_driver_logs_warnings_only_unless_the_user_configured_logging(monkeypatch, tmp_path):
    for name in ("SPARK_SUBMIT_OPTS", "SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    env = launcher.child_environment(spark_argv.split_submit_args(["app.py"]))
    assert quiet(env) and os.path.isfile(spark_log.CONFIG)
    with open(spark_log.CONFIG) as handle:
        config = handle.read()
    assert "rootLogger.level = warn" in config  # Spark's one harmless ERROR: driver/process/log_filter.py
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m")  # kept, the configuration added after it
    assert launcher.child_environment(spark_argv.split_submit_args(["app.py"]))["SPARK_SUBMIT_OPTS"].startswith(
        "-Xss4m "
    )
    # The user's own logging configuration wins: on the command line, in the environment, in conf/.
    for options in (
        ["--driver-java-options", "-Dlog4j2.configurationFile=mine.xml"],
        ["--conf", "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=mine.xml"],
        ["--deploy-mode", "cluster"],  # the driver's log is the cluster's, not this terminal's
    ):
        assert not quiet(launcher.child_environment(spark_argv.split_submit_args([*options, "app.py"]))), options
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dlog4j2.configurationFile=mine.properties")
    assert not quiet(launcher.child_environment(spark_argv.split_submit_args(["app.py"])))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert not quiet(launcher.child_environment(spark_argv.split_submit_args(["app.py"])))
