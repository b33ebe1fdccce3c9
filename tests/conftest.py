"""Shared fixtures: an isolated environment for every test, one SparkSession for the whole run."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from tests import helpers

# CI runs the property tests on a fixed sequence of examples (the same each run, so a red CI is a
# change's doing); a developer's run draws new ones, and `--hypothesis-seed N` explores further.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def listener_cache(tmp_path_factory):
    """One cache of the JVM listener's jar for the whole run: compiled once (javac takes seconds),
    never in the real home folder."""
    return str(tmp_path_factory.mktemp("listener-cache"))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, listener_cache):
    """Every test runs in its own folder, with no colour, a fixed width and no inherited root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARKRECOVER_CACHE", listener_cache)
    monkeypatch.delenv("SPARKRECOVER_NO_JVM_LISTENER", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("SPARKRECOVER_ROOT", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    # The venv's bin first, so spark-submit and python are the ones this test run uses.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    from sparkrecover.cli import render
    from sparkrecover.driver import runtime

    render.reset()
    runtime.install(None)
    yield tmp_path
    runtime.install(None)
    render.reset()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession shared by every in-process test (a JVM start costs ~10 s)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparkrecover-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def jar(listener_cache):
    """The package's jar, built for the Spark of this test run."""
    from sparkrecover.launch import listener_jar
    from sparkrecover.launch.spark_submit import find_spark_submit

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(listener_jar.CACHE_ENV, listener_cache)
        patch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        built = listener_jar.ensure_jar(find_spark_submit())
    assert built.path, built.reason
    return built.path


@pytest.fixture(scope="session")
def jvm(spark, jar):
    """The session's JVM with the package's jar loaded (submit passes it with --jars; the shared
    test session was started without it): the driver's class loader and the executors' get it."""
    gateway = spark._jvm
    loader = gateway.java.lang.Thread.currentThread().getContextClassLoader()
    loader.addURL(gateway.java.io.File(jar).toURI().toURL())
    spark.sparkContext._jsc.addJar(jar)
    return gateway


@pytest.fixture
def cli():
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    return helpers.run_cli_inprocess


@pytest.fixture(scope="session")
def s3_server():
    """One moto S3 server on 127.0.0.1 (a random free port) for the whole session."""
    from tests.s3server import MotoS3

    server = MotoS3()
    server.create_bucket()
    yield server
    if server.running:
        server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The S3 server, running, with the standard AWS variables pointing at it (for this process
    and the processes it starts) and a fresh s3:// prefix in its bucket as ``s3.prefix``."""
    if not s3_server.running:
        s3_server.start()
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    s3_server.prefix = s3_server.unique_prefix()
    yield s3_server
    if not s3_server.running:
        s3_server.start()


@pytest.fixture
def run(tmp_path):
    """A synthetic run (tests.journals.Run) under tmp_path/root, its first attempt started."""
    from tests.journals import Run

    return Run(tmp_path / "root").start_attempt()
