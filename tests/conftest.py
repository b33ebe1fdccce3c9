"""Shared fixtures: an isolated environment for every test, one SparkSession for the whole run."""
from __future__ import annotations

import os
import sys

import pytest

from tests import helpers


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
    from sparkrecover import render, runtime

    render._console = None
    runtime.install(None)
    yield tmp_path
    runtime.install(None)
    render._console = None


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession shared by every in-process test (a JVM start costs ~10 s)."""
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("sparkrecover-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def cli():
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    return helpers.run_cli_inprocess
