"""The driver's class archive without a JVM: where it lives, when a driver is given it, how the
user's Java options are kept, what a damaged or refused archive becomes, and the option that
turns it off (a fake spark-submit shows the command line; tests/e2e/test_class_archive.py runs
the JVM)."""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest

from sparkrecover.launch import spark_argv
from sparkrecover.launch.jvm_files import class_archive
from tests.helpers import fake_executable


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A fake spark-submit that writes its arguments to a file, an app, the archive turned on."""
    monkeypatch.delenv(class_archive.DISABLE_ENV, raising=False)
    monkeypatch.setenv("SPARKRECOVER_NO_JVM_LISTENER", "1")  # no jar to build: faster, and the key has none
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARKRECOVER_CACHE", str(tmp_path / "cache"))  # each test its own archives
    (tmp_path / "app.py").write_text("print('hi')\n")
    argv = tmp_path / "argv"
    spark_submit = fake_executable(tmp_path / "bin" / "spark-submit", f'printf "%s\\n" "$@" > {argv}')
    return spark_submit, argv


def archive_of(spark_submit: str, *options: str) -> class_archive.ClassArchive:
    found = class_archive.archive_for(spark_submit, spark_argv.split_submit_args([*options, "app.py"]), None)
    assert found is not None
    return found


def put_whole(archive: class_archive.ClassArchive, content: bytes = b"archive") -> None:
    """An archive in place as a build leaves it: the file, then its size and time beside it."""
    os.makedirs(os.path.dirname(archive.path), exist_ok=True)
    with open(archive.path, "wb") as handle:
        handle.write(content)
    found = os.stat(archive.path)
    class_archive.write_whole(archive.record, json.dumps({"size": found.st_size, "mtime_ns": found.st_mtime_ns}))


def driver_java_options(argv_file) -> str | None:
    argv = argv_file.read_text().splitlines()
    return spark_argv.split_submit_args(argv).option("--driver-java-options")


def test_submit_gives_the_driver_a_whole_archive_after_the_users_own_java_options(cli, setup):
    spark_submit, argv = setup
    options = ("--master", "local[2]", "--driver-java-options", "-Dmine=1")
    archive = archive_of(spark_submit, *options)
    assert os.path.dirname(archive.path) == os.path.join(os.environ["SPARKRECOVER_CACHE"], class_archive.FOLDER)
    put_whole(archive)
    code, _, err = cli("submit", "--root", "runs", "--spark-submit", spark_submit, "--", *options, "app.py")
    assert code == 0, err
    given = shlex.split(driver_java_options(argv))
    assert given[0] == "-Dmine=1"
    assert f"-XX:SharedArchiveFile={archive.path}" in given
    assert "-Xlog:cds=off,cds+dynamic=off" in given  # nothing the JVM says of it reaches the output
    assert "archive" not in err.lower()


def test_no_class_archive_and_the_variable_give_none_and_make_none(cli, setup, monkeypatch):
    spark_submit, argv = setup
    archive = archive_of(spark_submit, "--master", "local[2]")
    put_whole(archive)
    code, _, err = cli(
        "submit", "--root", "runs", "--spark-submit", spark_submit, "--no-class-archive", "--", "--master",
        "local[2]", "app.py",
    )  # fmt: skip
    assert code == 0, err
    assert driver_java_options(argv) is None
    os.remove(archive.path)  # none now: a command that may not use one makes none either
    monkeypatch.setenv(class_archive.DISABLE_ENV, "1")
    code, out, err = cli("spark-submit-args", "--root", "runs", "--run-id", "r", "--", "--master", "local[2]", "app.py")
    assert code == 0, err
    assert "SharedArchiveFile" not in out
    assert os.listdir(os.path.dirname(archive.path)) == [os.path.basename(archive.record)]


def test_spark_submit_args_hands_the_archive_on_in_the_line(cli, setup):
    spark_submit, _ = setup
    archive = archive_of(spark_submit, "--master", "local[2]", "--conf", "spark.driver.extraJavaOptions=-Dmine=1")
    put_whole(archive)
    code, out, err = cli(
        "spark-submit-args", "--root", "runs", "--run-id", "r", "--spark-submit", spark_submit, "--",
        "--master", "local[2]", "--conf", "spark.driver.extraJavaOptions=-Dmine=1", "app.py",
    )  # fmt: skip
    assert code == 0, err
    parsed = spark_argv.split_submit_args(shlex.split(out))
    assert parsed.option("--driver-java-options") is None  # the user's setting holds both
    assert parsed.conf("spark.driver.extraJavaOptions") == f"-Dmine=1 {archive.driver_options(verdict=False)}"
    # No log file named: a JVM whose log file's folder is missing (another machine, the folder
    # removed) would not start.
    assert "-Xlog:cds+dynamic" not in out


@pytest.mark.parametrize(
    "options, env",
    [
        (["--deploy-mode", "cluster", "--master", "yarn"], {}),  # the driver runs elsewhere
        (["--driver-java-options", "-XX:SharedArchiveFile=/mine.jsa"], {}),  # the user's own archive
        (["--conf", "spark.driver.extraJavaOptions=-Xshare:off"], {}),
        ([], {"SPARK_SUBMIT_OPTS": "-XX:SharedArchiveFile=/mine.jsa"}),
        ([], {class_archive.DISABLE_ENV: "1"}),
    ],
)
def test_no_archive_where_the_driver_runs_elsewhere_or_the_user_chose_class_sharing(setup, monkeypatch, options, env):
    spark_submit, _ = setup
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert class_archive.archive_for(spark_submit, spark_argv.split_submit_args([*options, "app.py"]), None) is None


def test_the_key_follows_the_class_path_and_the_listener_jar_not_plain_java_options(setup):
    spark_submit, _ = setup
    plain = archive_of(spark_submit).path
    assert archive_of(spark_submit, "--driver-java-options", "-Dx=1 -Xlog:gc").path == plain
    assert archive_of(spark_submit, "--driver-class-path", "/x.jar").path != plain
    assert archive_of(spark_submit, "--conf", "spark.driver.extraClassPath=/x.jar").path != plain
    assert archive_of(spark_submit, "--driver-memory", "48g").path != plain
    with_jar = class_archive.archive_for(spark_submit, spark_argv.split_submit_args(["app.py"]), "/cache/l-1.jar")
    assert with_jar is not None and with_jar.path != plain


def test_a_damaged_archive_is_never_given_and_is_discarded(setup):
    spark_submit, _ = setup
    archive = archive_of(spark_submit)
    put_whole(archive, b"x" * 1000)
    assert class_archive.ready(archive)
    with open(archive.path, "r+b") as handle:
        handle.truncate(500)  # a truncated archive crashes the JVM that maps it (SIGBUS)
    assert not class_archive.ready(archive)
    assert not os.path.exists(archive.path) and not os.path.exists(archive.record)
    assert class_archive.needs_build(archive)


def test_an_archive_the_jvm_refused_is_made_again_once_then_no_more(setup):
    spark_submit, _ = setup
    archive = archive_of(spark_submit)
    put_whole(archive)
    refusal = f"[0.5s][warning][cds,dynamic] {class_archive.REFUSED}. The top archive failed to load: {archive.path}\n"
    with open(archive.log, "w") as handle:
        handle.write(refusal)
    assert not class_archive.ready(archive)
    assert not os.path.exists(archive.path) and class_archive.needs_build(archive)
    put_whole(archive)  # made again, and refused again
    with open(archive.log, "w") as handle:
        handle.write(refusal)
    assert not class_archive.ready(archive)
    assert "refused" in (class_archive_reason := archive.failed_reason() or "")
    assert not class_archive.needs_build(archive), class_archive_reason


def test_a_folder_with_files_before_sparks_jars_makes_no_archive(setup, tmp_path, monkeypatch):
    """JDK 17 refuses to write (and to map) an archive behind a non-empty folder on the class path."""
    spark_submit, _ = setup
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    archive = archive_of(spark_submit)
    assert "holds files" in (class_archive.unarchivable(archive, spark_submit) or "")
    (conf / "spark-defaults.conf").unlink()
    assert class_archive.unarchivable(archive, spark_submit) is None


def test_a_warm_up_that_fails_leaves_a_note_and_the_next_runs_try_no_more(cli, setup):
    spark_submit, _ = setup  # the fake spark-submit writes no archive: the build fails
    archive = archive_of(spark_submit, "--master", "local[2]")
    code, _, err = cli(
        "submit", "--root", "runs", "--spark-submit", spark_submit, "--", "--master", "local[2]", "app.py"
    )
    assert code == 0, err
    deadline = time.monotonic() + 120
    while archive.failed_reason() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "wrote no archive" in (archive.failed_reason() or "")
    assert not os.path.exists(archive.lock)
    assert not class_archive.needs_build(archive)
    code, _, err = cli(
        "submit", "--root", "runs", "--spark-submit", spark_submit, "--", "--master", "local[2]", "app.py"
    )
    assert code == 0 and "archive" not in err.lower()
    assert not os.path.exists(archive.lock)  # no build started again


@pytest.mark.parametrize(
    "options, defaults, expected",
    [
        ([], "", ["--driver-java-options", "-Dours"]),
        ([], "-Dfile=1", ["--driver-java-options", "-Dfile=1 -Dours"]),
        (["--driver-java-options", "-Da"], "-Dfile=1", ["--driver-java-options", "-Da -Dours"]),
        (["--driver-java-options=-Da"], "", ["--driver-java-options=-Da -Dours"]),
        (
            ["--driver-java-options", "-Da", "--conf", "spark.driver.extraJavaOptions=-Db"],
            "",
            ["--driver-java-options", "-Da", "--conf", "spark.driver.extraJavaOptions=-Db -Dours"],
        ),
    ],
)
def test_java_options_are_added_to_the_setting_spark_submit_takes(tmp_path, options, defaults, expected):
    properties = tmp_path / "spark.properties"
    properties.write_text(f"spark.driver.extraJavaOptions {defaults}\n" if defaults else "")
    assert spark_argv.with_java_options(options, [str(properties)], "-Dours") == expected
