"""The driver's class archive with real JVMs: the first driver runs as before and an archive is
made after it in the background; the next driver (a resume) maps Spark's classes, and the
listener's, from it, as the JVM's class-loading log says; an archive the JVM refuses is made
again without a word on the driver's output."""

from __future__ import annotations

import os
import shutil
import time
import zipfile

import pytest

from sparkrecover.jvm import LISTENER_CLASS
from sparkrecover.launch import launcher, spark_argv
from sparkrecover.launch.jvm_files import class_archive
from tests import conftest
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e

APP = """
import os, sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
print("rows", spark.range(10).count())
spark.stop()
marker = sys.argv[1]
if not os.path.exists(marker):  # the first run fails after its work: a resume has something to do
    open(marker, "w").close()
    sys.exit(3)
"""
SHARED = "shared objects file (top)"
BUILD_TIMEOUT = 900


def with_archives(env: dict[str, str], cache: str) -> dict[str, str]:
    """The environment of a CLI that makes and gives the archive in ``cache``: the drivers without
    the tests' own archive (tests/jvm_archive.py), with the tests' JIT flags."""
    env = {**env, "SPARKRECOVER_CACHE": cache}
    env.pop(class_archive.DISABLE_ENV, None)
    if conftest._jvm_options:
        env["SPARK_SUBMIT_OPTS"] = conftest._jvm_options
    else:
        env.pop("SPARK_SUBMIT_OPTS", None)
    return env


def archive_for(env: dict[str, str], *options: str) -> class_archive.ClassArchive:
    """The archive the CLI would use for these options (the same key, the same jar) in ``env``."""
    from sparkrecover.launch.jvm_files import listener_jar

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        spark_submit = launcher.find_spark_submit()
        jar = listener_jar.ensure_jar(spark_submit).path
        found = class_archive.archive_for(spark_submit, spark_argv.split_submit_args([*options, "app.py"]), jar)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert found is not None
    return found


def wait_until_made(archive: class_archive.ClassArchive) -> None:
    deadline = time.monotonic() + BUILD_TIMEOUT
    while not archive.usable() and time.monotonic() < deadline:
        assert archive.failed_reason() is None, archive.failed_reason()
        time.sleep(1)
    assert archive.usable(), "no archive was made"


def loaded_from(log: str, name: str) -> str:
    with open(log) as handle:
        for line in handle:
            if f" {name} source: " in line:
                return line.split(" source: ", 1)[1].strip()
    raise AssertionError(f"{name} was not loaded")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One submit whose driver had no archive (it fails at its end, so that a resume has work), and
    the archive made after it, waited for."""
    folder = tmp_path_factory.mktemp("class-archive")
    env = with_archives(dict(os.environ), str(folder / "cache"))
    (folder / "app.py").write_text(APP)
    options = ("--master", "local[2]", "--conf", "spark.ui.enabled=false")
    archive = archive_for(env, *options)
    done = run_cli(
        "submit", "--root", str(folder / "runs"), "--run-id", "first", "--", *options, "app.py", str(folder / "marker"),
        env=env, cwd=str(folder), timeout=600,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert ".jsa" not in done.stdout + done.stderr and "[cds" not in done.stdout + done.stderr
    wait_until_made(archive)
    return folder, env, options, archive


def test_the_archive_made_after_the_first_driver_is_mapped_by_the_resumed_one(made):
    folder, env, _, archive = made
    log = str(folder / "classes.log")
    done = run_cli(
        "resume", "first", "--root", str(folder / "runs"), "--",
        "--driver-java-options", f"-Xlog:class+load=info:file={log}",
        env=env, cwd=str(folder), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert loaded_from(log, "org.apache.spark.SparkContext") == SHARED
    assert loaded_from(log, LISTENER_CLASS) == SHARED  # from --jars: Spark's own class loader
    assert not class_archive.needs_build(archive) and not os.path.exists(archive.lock)
    assert "[cds" not in done.stdout + done.stderr


def test_an_archive_the_jvm_refuses_is_made_again_without_a_word(made, tmp_path):
    """An archive made for another class path, put where the archive of this one goes (as an
    unseen change would leave it): the driver runs without it, quietly, and the next one maps
    classes from the archive made again after it."""
    _, env, options, made_archive = made
    extra = tmp_path / "extra.jar"
    with zipfile.ZipFile(extra, "w") as jar:
        jar.writestr("extra.txt", "on the driver's class path")
    more = (*options, "--driver-class-path", str(extra))
    archive = archive_for(env, *more)
    assert archive.path != made_archive.path
    shutil.copy(made_archive.path, archive.path)
    found = os.stat(archive.path)
    class_archive.write_whole(archive.record, f'{{"size": {found.st_size}, "mtime_ns": {found.st_mtime_ns}}}')
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "marker").write_text("")
    logs = []
    for attempt in ("refused", "made-again"):
        log = str(tmp_path / f"{attempt}.log")
        logs.append(log)
        done = run_cli(
            "submit", "--root", str(tmp_path / "runs"), "--",
            *more, "--driver-java-options", f"-Xlog:class+load=info:file={log}", "app.py", str(tmp_path / "marker"),
            env=env, cwd=str(tmp_path), timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "[cds" not in done.stdout + done.stderr
        assert ".jsa" not in done.stdout + done.stderr and "[cds" not in done.stdout + done.stderr
        if attempt == "refused":
            assert loaded_from(log, "org.apache.spark.SparkContext") != SHARED
            wait_until_made(archive)
    assert loaded_from(logs[-1], "org.apache.spark.SparkContext") == SHARED
    assert archive.failed_reason() is None
