"""Clear refusals before anything is launched: a fake spark-submit that leaves
a marker when run proves nothing was."""

from __future__ import annotations

import os

import pytest

from sparkrecover.launch import attempts


def fake_spark_submit(tmp_path) -> tuple[str, str]:
    """(the fake spark-submit, the file it creates when it runs)."""
    marker = tmp_path / "launched"
    script = tmp_path / "spark-submit"
    script.write_text(f'#!/bin/sh\necho "$@" > {marker}\nexit 0\n')
    script.chmod(0o755)
    (tmp_path / "app.py").write_text("print('hi')\n")
    return str(script), str(marker)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    attempts._WARNED_CONNECT.clear()


@pytest.mark.parametrize(
    "options",
    [
        ["--master", "spark://127.0.0.1:7077", "--deploy-mode", "cluster"],
        ["--conf", "spark.master=spark://h:7077", "--conf", "spark.submit.deployMode=cluster"],
    ],
)
def test_cluster_mode_on_standalone_is_refused_before_launch(cli, tmp_path, options):
    spark_submit, marker = fake_spark_submit(tmp_path)
    code, out, err = cli(
        "submit", "--root", "s3://bucket/runs", "--spark-submit", spark_submit, "--", *options, "app.py"
    )
    assert code == 2 and out == ""
    assert "Spark runs Python apps on standalone in client mode only" in err and "Traceback" not in err
    assert not os.path.exists(marker) and not os.path.exists(tmp_path / ".sparkrecover")


def test_client_mode_on_standalone_is_launched(cli, tmp_path):
    spark_submit, marker = fake_spark_submit(tmp_path)
    code, _, err = cli(
        "submit",
        "--root",
        str(tmp_path / "root"),
        "--spark-submit",
        spark_submit,
        "--",
        "--master",
        "spark://127.0.0.1:7077",
        "app.py",
    )
    assert code == 0, err
    assert os.path.exists(marker)


def test_a_resume_that_asks_for_cluster_mode_on_standalone_is_refused(cli, tmp_path):
    spark_submit, marker = fake_spark_submit(tmp_path)
    root = str(tmp_path / "root")
    with open(spark_submit, "a") as handle:
        handle.write("")
    code, _, err = cli(
        "submit",
        "--root",
        root,
        "--run-id",
        "r1",
        "--spark-submit",
        spark_submit,
        "--",
        "--master",
        "spark://127.0.0.1:7077",
        "app.py",
    )
    assert code == 0, err
    os.remove(marker)
    # An unfinished run resumed by a second submit with cluster mode merged over its options.
    code, _, err = cli(
        "submit",
        "--root",
        root,
        "--run-id",
        "r1",
        "--spark-submit",
        spark_submit,
        "--",
        "--master",
        "spark://127.0.0.1:7077",
        "--deploy-mode",
        "cluster",
        "app.py",
    )
    assert code == 2 and "client mode only" in err
    assert not os.path.exists(marker)


def test_a_root_on_hdfs_without_a_hadoop_client_is_one_line_and_exit_3(cli, tmp_path):
    root = "hdfs://127.0.0.1:1/runs"
    spark_submit, marker = fake_spark_submit(tmp_path)
    code, out, err = cli("submit", "--root", root, "--spark-submit", spark_submit, "--", "app.py")
    lines = err.strip().splitlines()
    assert code == 3 and out == "" and len(lines) == 1, err
    assert "cannot be reached" in lines[0] and "Hadoop client" in lines[0] and "pyarrow" in lines[0]
    assert not os.path.exists(marker)


def test_a_root_on_s3_without_s3fs_names_it(cli, tmp_path, monkeypatch):
    import sys

    registry = sys.modules["fsspec.registry"]
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed
    # fsspec looks protocols up through a read-only view of this very dict: drop the entries an
    # earlier test's import of s3fs made, in place (put back after the test).
    for protocol in ("s3", "s3a"):
        monkeypatch.delitem(registry._registry, protocol, raising=False)
    spark_submit, marker = fake_spark_submit(tmp_path)
    code, _, err = cli("submit", "--root", "s3://bucket/runs", "--spark-submit", spark_submit, "--", "app.py")
    lines = err.strip().splitlines()
    assert code == 3 and len(lines) == 1, err
    assert "s3fs (pip install s3fs)" in lines[0]
    assert not os.path.exists(marker)


def test_a_native_client_failure_is_cut_to_one_line(monkeypatch):
    """pyarrow's HDFS lists every dlopen it tried, about 80 lines: one is shown."""
    import fsspec.core

    from sparkrecover.errors import StorageError
    from sparkrecover.rundir import storage

    def fail(url):
        raise OSError("Unable to load libhdfs: libhdfs.so: cannot open shared object file\n" + "dlopen x\n" * 80)

    monkeypatch.setattr(fsspec.core, "url_to_fs", fail)
    with pytest.raises(StorageError) as raised:
        storage.filesystem("hdfs://nn:8020/runs")
    assert "\n" not in str(raised.value) and "Unable to load libhdfs" in str(raised.value)
    assert raised.value.exit_code == 3


@pytest.mark.parametrize("how", ["option", "env", "conf"])
def test_spark_connect_warns_once_before_launch(cli, tmp_path, monkeypatch, how):
    spark_submit, marker = fake_spark_submit(tmp_path)
    options: list[str] = []
    if how == "option":
        options = ["--remote", "sc://127.0.0.1:15002/;token=secret"]
    elif how == "conf":
        options = ["--conf", "spark.remote=sc://127.0.0.1:15002/;token=secret"]
    else:
        monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002/;token=secret")
    code, _, err = cli(
        "submit", "--root", str(tmp_path / "root"), "--spark-submit", spark_submit, "--", *options, "app.py"
    )
    assert code == 0, err
    assert err.count("Spark Connect") == 1 and "cannot be recorded" in err
    assert "secret" not in err
    assert os.path.exists(marker)


def test_no_connect_warning_without_spark_connect(cli, tmp_path):
    spark_submit, _ = fake_spark_submit(tmp_path)
    code, _, err = cli("submit", "--root", str(tmp_path / "root"), "--spark-submit", spark_submit, "--", "app.py")
    assert code == 0 and "Spark Connect" not in err
