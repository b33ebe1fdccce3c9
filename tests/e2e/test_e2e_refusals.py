"""Refusals through the real command line, in a process of its own. tests/cli/test_refusals.py
checks the same in-process with a stand-in spark-submit; here nothing is stood in: what a native
library or the JVM prints straight to the terminal shows too."""

from __future__ import annotations

import os

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("java_home", [False, True], ids=["no-java-home", "java-home"])
def test_a_root_on_hdfs_without_a_hadoop_client_is_exit_3_in_one_line(tmp_path, java_home):
    # With pyarrow installed (the test extras bring it) its HDFS driver really tries to load
    # libjvm (without JAVA_HOME) or libhdfs (with it), as on a machine without a Hadoop client.
    pytest.importorskip("pyarrow")
    (tmp_path / "app.py").write_text("open('launched', 'w').close()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "HADOOP_HOME", "CLASSPATH")}
    if java_home:
        import shutil

        env["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("java") or "java")))
    result = run_cli(
        "submit", "--root", "hdfs://127.0.0.1:1/runs", "--", "app.py", env=env, cwd=str(tmp_path), timeout=120
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3 and result.stdout == "" and len(lines) == 1, result.stderr
    assert "cannot be reached" in lines[0] and "Hadoop client" in lines[0] and "dlopen" not in lines[0]
    assert not (tmp_path / "launched").exists()


def test_spark_connect_is_warned_about_once_before_spark_submit_starts(tmp_path):
    # No Connect server listens on port 1: the app fails, after the warning.
    (tmp_path / "app.py").write_text("from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate()\n")
    result = run_cli(
        "submit",
        "--root",
        str(tmp_path / "root"),
        "--",
        "--remote",
        "sc://127.0.0.1:1/;token=secret",
        "app.py",
        cwd=str(tmp_path),
        timeout=300,
    )
    lines = result.stderr.splitlines()
    warnings = [number for number, line in enumerate(lines) if "Spark Connect" in line]
    assert len(warnings) == 1 and "cannot be recorded" in lines[warnings[0]], result.stderr
    spark_output = [number for number, line in enumerate(lines) if "log4j" in line or " WARN " in line]
    assert spark_output and warnings[0] < spark_output[0], result.stderr  # before spark-submit's first word
    assert "secret" not in result.stderr + result.stdout
