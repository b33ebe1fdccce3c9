"""Shared fixtures: an isolated environment for every test, one SparkSession for the whole run."""

from __future__ import annotations

import collections
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import settings

from tests import helpers

# CI runs the property tests on a fixed sequence of examples (the same each run, so a red CI is a
# change's doing); a developer's run draws new ones, and `--hypothesis-seed N` explores further.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The JVM of every spark-submit the tests start compiles with C1 only and collects with the serial
# collector: these short-lived drivers then need about half the CPU time (docs/contributing.md has
# the measurements). The behaviour under test is Spark's and sparkrecover's, not the JIT's.
# $SPARKRECOVER_TEST_JVM_OPTIONS replaces the flags ("" for none); a SPARK_SUBMIT_OPTS already set
# is left as it is.
# They also map Spark's classes from a class-data-sharing archive built once (tests/jvm_archive.py)
# unless $SPARKRECOVER_TEST_CDS is 0.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_jvm_options = os.environ.get("SPARKRECOVER_TEST_JVM_OPTIONS", TEST_JVM_OPTIONS)
_set_jvm_options = bool(_jvm_options) and "SPARK_SUBMIT_OPTS" not in os.environ
if _set_jvm_options:
    os.environ["SPARK_SUBMIT_OPTS"] = _jvm_options

# The in-process session's Python workers run on the tests' own Python, as `submit` has a local
# master's workers do (launch/launcher.py: python_settings): pyspark's default, `python3` on PATH,
# may lack what the driver has, and Spark 4 runs Python UDFs through Arrow whenever the driver can
# import pandas and pyarrow, which the workers then import too.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# Every Python process the tests start, pyspark's Python workers among them, imports pyspark from
# the installed package's compiled files (tests/pysite/sitecustomize.py), as the driver bootstrap
# does for the driver: the zip spark-submit puts first on their path costs each about 1 s of CPU to
# compile (docs/contributing.md). $SPARKRECOVER_TEST_COMPILED_PYSPARK=0 leaves them on the zip.
if os.environ.get("SPARKRECOVER_TEST_COMPILED_PYSPARK", "1") != "0":
    _pysite = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pysite")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_pysite, os.environ.get("PYTHONPATH", "")) if p)

# Seconds each end-to-end file's tests took in the whole suite on three workers (2026-11-26,
# `--durations`, summed per file), to start the longest first; a file not listed counts
# E2E_TEST_SECONDS for each of its end-to-end tests. Only the order depends on them. Files whose
# tests were merged since (fewer spark-submit launches, docs/contributing.md) are scaled by their
# launches: test_shuffle_keep.py 19 to 16, test_task_resume.py 21 to 19, test_e2e_tables.py 7 to 5,
# test_e2e_resume.py 19 to 17.
E2E_FILE_SECONDS = {
    "tests/e2e/test_cluster_shuffle.py": 560,
    "tests/e2e/test_shuffle_keep.py": 525,
    "tests/e2e/test_task_resume.py": 450,
    "tests/e2e/test_post_shuffle_write.py": 375,
    "tests/e2e/test_e2e_zerocode.py": 365,
    "tests/e2e/test_task_resume_stores.py": 355,
    "tests/e2e/test_e2e_restart.py": 335,
    "tests/e2e/test_e2e_resume.py": 300,
    "tests/e2e/test_e2e_hive.py": 245,
    "tests/e2e/test_e2e_standalone.py": 240,
    "tests/e2e/test_range_shuffle.py": 235,
    "tests/e2e/test_e2e_examples.py": 233,
    "tests/e2e/test_signals.py": 193,
    "tests/e2e/test_e2e_tables.py": 165,
    # Not measured in the whole suite yet: alone on a loaded machine (2026-11-28), two tests, four
    # driver runs and two archive builds.
    "tests/e2e/test_class_archive.py": 300,
    # Its two tests took 67 s and 55 s in CI's log of 2026-11-28 (the 15 slowest), plus its own
    # cluster's start: counted 70 s by its tests, it was handed out among the last files.
    "tests/e2e/test_cluster_executor_loss.py": 145,
}
E2E_TEST_SECONDS = 35

# The Airflow leg runs in an environment of its own (scripts/test_airflow.sh), not in the suite's.
collect_ignore = ["airflow_leg"]

# Set to a file, every spark-submit a test starts (its own, the CLI's, a fixture's) appends the
# test's node id there, and the run ends with the counts: a measure of the suite's cost that a
# loaded machine does not change (docs/contributing.md).
LAUNCH_LOG_ENV = "SPARKRECOVER_TEST_LAUNCH_LOG"
_launch_shim: str | None = None


def _venv_bin() -> str:
    return os.path.dirname(sys.executable)


def pytest_configure(config):
    """The JVMs' class archive, once, in the main process (pytest-xdist's workers inherit its
    environment). With $SPARKRECOVER_TEST_LAUNCH_LOG set: a spark-submit first on PATH that logs,
    then runs the venv's (fixtures of a wider scope start before ``isolated`` sets PATH, so set it
    here)."""
    global _launch_shim
    if hasattr(config.option, "loadscopereorder"):
        # pytest-xdist's scheduler (in the main process) would hand out the files with the most
        # tests first, the quick ones, and leave the long few-test end-to-end files to the end.
        config.option.loadscopereorder = False
    if _set_jvm_options and os.environ.get("SPARKRECOVER_TEST_CDS", "1") != "0" and not hasattr(config, "workerinput"):
        from tests.jvm_archive import archive_options

        extra = archive_options(_jvm_options)
        if extra:
            os.environ["SPARK_SUBMIT_OPTS"] = f"{_jvm_options} {extra}"
    log = os.environ.get(LAUNCH_LOG_ENV)
    if not log:
        return
    real = shutil.which("spark-submit", path=_venv_bin() + os.pathsep + os.environ.get("PATH", ""))
    assert real, "no spark-submit to count"
    _launch_shim = tempfile.mkdtemp(prefix="sparkrecover-launches-")
    shim = os.path.join(_launch_shim, "spark-submit")
    with open(shim, "w") as handle:
        handle.write(
            "#!/bin/sh\n"
            f'printf \'%s\\n\' "${{PYTEST_CURRENT_TEST%% (*}}" >> "{os.path.abspath(log)}"\n'
            f'exec "{real}" "$@"\n'
        )
    os.chmod(shim, 0o755)
    os.environ["PATH"] = _launch_shim + os.pathsep + os.environ.get("PATH", "")


def pytest_collection_modifyitems(config, items):
    """The longest files first (E2E_FILE_SECONDS; another end-to-end file counts
    E2E_TEST_SECONDS a test of it), the files without end-to-end tests last: on pytest-xdist
    workers the long files start early and the quick tests fill the last minutes. Within a file the
    order stays."""
    per_file = collections.Counter(item.path for item in items if item.get_closest_marker("e2e"))

    def cost(item) -> float:
        relative = os.path.relpath(item.path, config.rootpath).replace(os.sep, "/")
        return E2E_FILE_SECONDS.get(relative, E2E_TEST_SECONDS * per_file[item.path])

    items.sort(key=lambda item: -cost(item))


def pytest_terminal_summary(terminalreporter, config):
    log = os.environ.get(LAUNCH_LOG_ENV)
    if not log or hasattr(config, "workerinput") or not os.path.exists(log):
        return
    with open(log) as handle:
        counts = collections.Counter(line.strip() for line in handle if line.strip())
    terminalreporter.section("spark-submit launches")
    for test, count in sorted(counts.items()):
        terminalreporter.write_line(f"{count:3d}  {test}")
    terminalreporter.write_line(f"{sum(counts.values())} launches by {len(counts)} tests ({log})")


@pytest.fixture(scope="session")
def listener_cache(tmp_path_factory):
    """One cache of the JVM listener's jar for the whole run: compiled once (javac takes seconds),
    never in the real home folder. Under pytest-xdist the workers share it (the session's temporary
    folder holds one per worker): the jar is moved into place whole, so concurrent builds are safe."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "listener-cache"
        shared.mkdir(exist_ok=True)
        return str(shared)
    return str(tmp_path_factory.mktemp("listener-cache"))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, listener_cache):
    """Every test runs in its own folder, with no colour, a fixed width and no inherited root."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARKRECOVER_CACHE", listener_cache)
    monkeypatch.delenv("SPARKRECOVER_NO_JVM_LISTENER", raising=False)
    # The drivers map the tests' own class archive (tests/jvm_archive.py), not one the CLI would
    # make in the background for each new setting: a test of that archive turns this off.
    monkeypatch.setenv("SPARKRECOVER_NO_CLASS_ARCHIVE", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("SPARKRECOVER_ROOT", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    # The venv's bin first, so spark-submit and python are the ones this test run uses (after the
    # counting spark-submit, when launches are counted).
    first = [_launch_shim] if _launch_shim else []
    monkeypatch.setenv("PATH", os.pathsep.join([*first, _venv_bin(), os.environ.get("PATH", "")]))
    from sparkrecover.cli import render
    from sparkrecover.driver.process import runtime

    render.reset()
    runtime.install(None)
    yield tmp_path
    runtime.install(None)
    render.reset()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession shared by every in-process test (a JVM start costs ~10 s)."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as patch:
        if _jvm_options and os.environ.get("SPARK_SUBMIT_OPTS") == _jvm_options:
            # Not this long-lived JVM: the many jobs of the in-process tests pay for C2's compiles.
            patch.delenv("SPARK_SUBMIT_OPTS")
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
    from sparkrecover.launch.jvm_files import listener_jar
    from sparkrecover.launch.launcher import find_spark_submit

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


@pytest.fixture(scope="session")
def plain_runs(tmp_path_factory):
    """The session's reference runs (tests.references.PlainRuns): each uninterrupted run of a
    script under plain spark-submit starts once, beside the first test that wants it, and is shared."""
    from tests.references import PlainRuns

    runs = PlainRuns(tmp_path_factory.mktemp("plain-runs"))
    yield runs
    runs.stop_all()


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
