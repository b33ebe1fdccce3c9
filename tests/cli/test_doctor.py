"""``sparkrecover doctor``: one line per thing a run needs, what to fix, exit 1 when something must
be fixed. Each broken machine is made for real (a pyspark folder whose Python files and jars
differ, a PATH without javac, a root nobody can write, s3fs missing), never by mocking a check."""

from __future__ import annotations

import os
import sys

import orjson
import pytest


def lines_of(out: str) -> dict[str, str]:
    """The check's name -> its whole line."""
    found = {}
    for line in out.splitlines():
        words = line.split(maxsplit=2)
        if len(words) == 3 and words[0] in ("ok", "note", "problem"):
            found[words[1]] = line
    return found


def statuses(cli, *args) -> tuple[int, dict[str, str], str]:
    code, out, err = cli("doctor", "--json", *args)
    document = orjson.loads(out)
    return code, {row["check"]: row["status"] for row in document["checks"]}, err


def test_a_machine_with_everything_says_ok_on_each_line_and_exits_0(cli, tmp_path):
    code, out, err = cli("doctor", "--root", str(tmp_path / "runs"))
    assert (code, err) == (0, ""), out
    found = lines_of(out)
    for check in ("java", "javac", "spark-submit", "pyspark", "driver-python", "root"):
        assert found[check].startswith("ok"), out
    # The listener's jar is compiled on first use: not built yet is no problem.
    assert found["listener-jar"].split()[0] in ("ok", "note"), out
    assert out.rstrip().endswith("all well: nothing to fix")
    # The root's probe file is gone, and so is the folder made to write it.
    assert not (tmp_path / "runs").exists()


def test_a_pyspark_whose_python_files_are_another_version_than_its_jars_is_named(cli, tmp_path, monkeypatch):
    """pyspark 4.3.0's jars under pyspark-client 4.2.0's Python files (what installing the Airflow
    Spark provider did): the driver's Python imports that pyspark."""
    package = tmp_path / "site" / "pyspark"
    (package / "jars").mkdir(parents=True)
    (package / "__init__.py").write_text("from pyspark.version import __version__\n")
    (package / "version.py").write_text('__version__: str = "4.2.0"\n')
    (package / "jars" / "spark-core_2.13-4.3.0.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    code, out, _err = cli("doctor", "--root", str(tmp_path / "runs"))
    assert code == 1, out
    line = lines_of(out)["pyspark"]
    assert line.startswith("problem"), out
    assert "4.2.0" in line and "4.3.0" in line and str(package) in line
    assert "pyspark-client" in line and "pip install" in line


def test_a_path_without_javac_is_a_problem_with_what_to_install(cli, tmp_path, monkeypatch):
    java = os.path.realpath(__import__("shutil").which("java") or "")
    assert java, "the tests need java"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(java)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable), "/usr/bin/nonexistent"]))
    code, out, _err = cli("doctor", "--root", str(tmp_path / "runs"))
    assert code == 1, out
    found = lines_of(out)
    assert found["java"].startswith("ok"), out
    assert found["javac"].startswith("problem") and "install a JDK" in found["javac"], out


def test_a_root_that_cannot_be_written_is_a_problem(cli, tmp_path):
    if os.geteuid() == 0:  # root writes anywhere: /proc refuses everyone
        root = "/proc"
        code, out, _ = cli("doctor", "--root", root)
    else:
        root = str(tmp_path / "ro")
        (tmp_path / "ro").mkdir()
        os.chmod(root, 0o500)
        try:
            code, out, _err = cli("doctor", "--root", root)
        finally:
            os.chmod(root, 0o700)
    assert code == 1, out
    line = lines_of(out)["root"]
    assert line.startswith("problem") and f"{root}: cannot write" in line, out


def test_a_root_on_s3_without_s3fs_is_a_problem_with_what_to_install(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if it were not installed: import fails
    code, out, _err = cli("doctor", "--root", "s3://etl/sparkrecover")
    assert code == 1, out
    found = lines_of(out)
    assert found["s3fs"].startswith("problem") and "pip install s3fs" in found["s3fs"], out
    assert found["root"].startswith("note") and "not checked" in found["root"], out


def test_json_is_one_document_with_a_status_per_check(cli, tmp_path):
    code, checks, err = statuses(cli, "--root", str(tmp_path / "runs"))
    assert code == 0, err
    assert set(checks) >= {"java", "javac", "listener-jar", "spark-submit", "pyspark", "driver-python", "root"}
    assert set(checks.values()) <= {"ok", "note"}


@pytest.mark.parametrize("variable", ["PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"])
def test_a_driver_python_that_cannot_import_sparkrecover_is_named_with_the_variable_that_chose_it(
    cli, tmp_path, monkeypatch, variable
):
    bare = tmp_path / "bare"
    import venv

    venv.EnvBuilder(with_pip=False).create(bare)
    monkeypatch.setenv(variable, str(bare / "bin" / "python"))
    code, out, _err = cli("doctor", "--root", str(tmp_path / "runs"))
    assert code == 1, out
    line = lines_of(out)["driver-python"]
    assert line.startswith("problem") and variable in line and "cannot import sparkrecover" in line, out


def test_a_root_on_s3_is_written_through_s3fs_and_sparks_s3a_side_is_told(cli, s3):
    """On a reachable bucket (moto on loopback): the probe file is written and deleted, and Spark's
    side of S3 is a note (pyspark ships no hadoop-aws; it may come on the launch's own line)."""
    code, out, _ = cli("doctor", "--root", s3.prefix)
    assert code == 0, out
    found = lines_of(out)
    assert found["s3fs"].startswith("ok") and found["root"].startswith("ok"), out
    assert f"{s3.prefix}: a file written and deleted" in found["root"]
    assert found["s3a"].startswith("note") and "hadoop-aws" in found["s3a"], out
    assert f"spark.hadoop.fs.s3a.endpoint={os.environ['AWS_ENDPOINT_URL']}" in found["s3a"]
    import s3fs

    assert s3fs.S3FileSystem(anon=False).find(s3.prefix) == []  # nothing left behind


def test_the_drivers_class_archive_is_named_made_or_not_and_never_a_problem(cli, tmp_path, monkeypatch):
    """Not made yet in a new cache folder; said to be turned off when it is (the suite turns it
    off by default, tests/conftest.py)."""
    monkeypatch.setenv("SPARKRECOVER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARKRECOVER_NO_CLASS_ARCHIVE", raising=False)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)  # the suite's own archive for its JVMs
    code, out, _ = cli("doctor", "--root", str(tmp_path / "runs"))
    line = lines_of(out)["class-archive"]
    assert code == 0 and line.startswith("note") and "not made yet" in line, out
    assert str(tmp_path / "cache") in line
    monkeypatch.setenv("SPARKRECOVER_NO_CLASS_ARCHIVE", "1")
    code, out, _ = cli("doctor", "--root", str(tmp_path / "runs"))
    assert code == 0 and "turned off (SPARKRECOVER_NO_CLASS_ARCHIVE is set)" in lines_of(out)["class-archive"]
    monkeypatch.delenv("SPARKRECOVER_NO_CLASS_ARCHIVE")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")
    code, out, _ = cli("doctor", "--root", str(tmp_path / "runs"))
    assert code == 0 and "the driver's own class-sharing options" in lines_of(out)["class-archive"]
