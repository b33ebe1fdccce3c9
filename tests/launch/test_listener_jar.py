"""The JVM listener's jar (compiled on first use, cached) and how submit registers it."""

from __future__ import annotations

import os
import zipfile

import pytest

from sparkrecover.jvm import LISTENER_CLASS
from sparkrecover.launch import launcher
from sparkrecover.launch.jvm_files import listener_jar
from sparkrecover.launch.launcher import bootstrap_command
from sparkrecover.launch.spark_argv import SubmitArgs, with_listener

JAR = "/cache/listener.jar"


@pytest.fixture
def spark_submit():
    return launcher.find_spark_submit()


def test_the_jar_is_compiled_once_then_taken_from_the_cache(tmp_path, monkeypatch, spark_submit):
    monkeypatch.setenv("SPARKRECOVER_CACHE", str(tmp_path / "cache"))
    first = listener_jar.ensure_jar(spark_submit)
    assert first.compiled and first.reason is None
    assert os.path.dirname(first.path) == str(tmp_path / "cache")
    with zipfile.ZipFile(first.path) as archive:
        assert LISTENER_CLASS.replace(".", "/") + ".class" in archive.namelist()
    built = os.stat(first.path).st_mtime_ns
    again = listener_jar.ensure_jar(spark_submit)
    assert (again.path, again.compiled) == (first.path, False)
    assert os.stat(again.path).st_mtime_ns == built
    assert [name for name in os.listdir(tmp_path / "cache")] == [os.path.basename(first.path)]


def test_the_cache_key_follows_the_source_and_the_spark_version():
    keys = {
        listener_jar.cache_key(b"class A {}", "4.3.0-scala2.13"),
        listener_jar.cache_key(b"class B {}", "4.3.0-scala2.13"),
        listener_jar.cache_key(b"class A {}", "3.5.8-scala2.12"),
    }
    assert len(keys) == 3
    assert listener_jar.cache_key(b"class A {}", "4.3.0-scala2.13") in keys


def test_a_class_moved_to_another_java_package_changes_the_cache_key(tmp_path, monkeypatch):
    """The same source in another folder is another class: a jar cached before the move must not
    stand in for it."""
    for package in ("bridge", "commit"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "Probe.java").write_text("final class Probe {}\n")
    monkeypatch.setattr(listener_jar.jvm, "FOLDER", str(tmp_path))
    before = listener_jar._read(str(tmp_path / "bridge" / "Probe.java"))
    after = listener_jar._read(str(tmp_path / "commit" / "Probe.java"))
    assert listener_jar.cache_key(before, "4.1.0-scala2.13") != listener_jar.cache_key(after, "4.1.0-scala2.13")


def test_the_spark_version_comes_from_the_jars_of_the_spark_in_use(tmp_path, monkeypatch):
    home = tmp_path / "spark-3.5"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core_2.12-3.5.8.jar").write_bytes(b"")
    (home / "bin").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    assert listener_jar.spark_jars_dir(str(home / "bin" / "spark-submit")) == str(home / "jars")
    assert listener_jar.spark_version(str(home / "jars")) == "3.5.8-scala2.12"
    # spark-submit itself prefers $SPARK_HOME when it is set, and so does the jar's build
    other = tmp_path / "other"
    (other / "jars").mkdir(parents=True)
    (other / "jars" / "spark-core_2.13-4.3.0.jar").write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(other))
    assert listener_jar.spark_jars_dir(str(home / "bin" / "spark-submit")) == str(other / "jars")


def test_without_javac_there_is_no_jar_and_the_reason_says_why(tmp_path, monkeypatch, spark_submit):
    monkeypatch.setenv("SPARKRECOVER_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    found = listener_jar.ensure_jar(spark_submit)
    assert found.path is None and "javac" in found.reason


def test_the_environment_can_turn_the_jvm_listener_off(monkeypatch, spark_submit):
    monkeypatch.setenv("SPARKRECOVER_NO_JVM_LISTENER", "1")
    found = listener_jar.ensure_jar(spark_submit)
    assert found.path is None and "SPARKRECOVER_NO_JVM_LISTENER" in found.reason


def test_a_compile_failure_is_remembered_not_retried(tmp_path, monkeypatch, spark_submit):
    monkeypatch.setenv("SPARKRECOVER_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "Broken.java"
    broken.write_text("package sparkrecover.jvm; class SparkRecoverListener { nonsense }\n")
    monkeypatch.setattr(listener_jar.jvm, "sources", lambda: [str(broken)])
    first = listener_jar.ensure_jar(spark_submit)
    assert first.path is None and first.reason.startswith("javac failed")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no javac now: the failure is not retried
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert listener_jar.ensure_jar(spark_submit).reason == first.reason


# -- registering it: --jars and spark.extraListeners merged with the user's ----------------------


@pytest.mark.parametrize(
    "options, expected",
    [
        ([], ["--jars", JAR, "--conf", f"spark.extraListeners={LISTENER_CLASS}"]),
        (
            ["--jars", "a.jar,b.jar"],
            ["--jars", f"a.jar,b.jar,{JAR}", "--conf", f"spark.extraListeners={LISTENER_CLASS}"],
        ),
        (
            ["--jars=a.jar", "--master", "local"],
            [f"--jars=a.jar,{JAR}", "--master", "local", "--conf", f"spark.extraListeners={LISTENER_CLASS}"],
        ),
        (
            ["--conf", "spark.jars=hdfs:///x/date=1/a.jar"],
            ["--conf", f"spark.jars=hdfs:///x/date=1/a.jar,{JAR}", "--conf", f"spark.extraListeners={LISTENER_CLASS}"],
        ),
        (
            ["--conf", "spark.extraListeners=com.acme.Audit", "-c", "spark.extraListeners=com.acme.Audit2"],
            [
                "--conf",
                "spark.extraListeners=com.acme.Audit",
                "-c",
                f"spark.extraListeners=com.acme.Audit2,{LISTENER_CLASS}",
                "--jars",
                JAR,
            ],
        ),
        (
            ["--conf=spark.extraListeners=com.acme.Audit"],
            [f"--conf=spark.extraListeners=com.acme.Audit,{LISTENER_CLASS}", "--jars", JAR],
        ),
        (
            ["--conf", f"spark.extraListeners={LISTENER_CLASS}", "--jars", JAR],
            ["--conf", f"spark.extraListeners={LISTENER_CLASS}", "--jars", JAR],
        ),
    ],
)
def test_the_listener_is_added_to_what_the_user_gave(options, expected):
    assert with_listener(options, JAR, {}) == expected


def test_values_from_the_properties_file_are_kept(tmp_path, monkeypatch, spark_submit):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# cluster defaults\nspark.extraListeners   com.acme.Audit\nspark.jars=/opt/acme.jar\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    parsed = SubmitArgs(options=["--master", "local[2]"], app=str(tmp_path / "app.py"))
    command = bootstrap_command(spark_submit, parsed, ["--run-id", "r"], listener_jar=JAR)
    assert command[1:7] == [
        "--master",
        "local[2]",
        "--jars",
        f"/opt/acme.jar,{JAR}",
        "--conf",
        f"spark.extraListeners=com.acme.Audit,{LISTENER_CLASS}",
    ]
    own = tmp_path / "job.properties"
    own.write_text("spark.extraListeners=com.acme.Other\n")
    parsed.options += ["--properties-file", str(own)]
    command = bootstrap_command(spark_submit, parsed, [], listener_jar=JAR)
    assert f"spark.extraListeners=com.acme.Other,{LISTENER_CLASS}" in command
    assert ["--jars", JAR] == command[command.index("--jars") : command.index("--jars") + 2]


def test_without_a_jar_the_command_is_left_alone(tmp_path, spark_submit):
    parsed = SubmitArgs(options=["--master", "local[2]"], app=str(tmp_path / "app.py"))
    command = bootstrap_command(spark_submit, parsed, ["--run-id", "r"])
    assert "--jars" not in command and not any("extraListeners" in item for item in command)
