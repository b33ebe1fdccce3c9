"""When submit installs the keeping shuffle manager, and what it hands the JVM."""

from __future__ import annotations

import hashlib
import os

import pytest

from sparkrecover.jvm import KEEPING_IO_CLASS, KEEPING_PLUGIN_CLASS, SHUFFLE_MANAGER_CLASS
from sparkrecover.launch import shuffles
from sparkrecover.launch.spark_argv import split_submit_args
from sparkrecover.rundir.plans import KeptMap, KeptShuffle


def confs(setup: shuffles.Setup) -> dict[str, str]:
    pairs = [setup.options[i + 1] for i in range(0, len(setup.options), 2) if setup.options[i] == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.fixture
def app(tmp_path):
    script = tmp_path / "etl.py"
    script.write_text("print('etl')\n")
    return str(script)


def test_auto_keeps_links_on_a_local_master_sharing_the_run_directorys_filesystem(tmp_path, app, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "spark-local"))
    parsed = split_submit_args(["--master", "local[2]", app])
    setup = shuffles.setup(parsed, str(tmp_path / "run"), "auto", jar="/x.jar")
    assert setup.reason is None and setup.mode == "link"
    values = confs(setup)
    keep = str(tmp_path / "run" / "shuffles")
    assert values["spark.shuffle.manager"] == SHUFFLE_MANAGER_CLASS
    assert values["spark.sparkrecover.shuffle.dir"] == keep and os.path.isdir(keep)
    assert values["spark.sparkrecover.shuffle.script"] == hashlib.sha256(b"print('etl')\n").hexdigest()
    assert "spark.sparkrecover.shuffle.reuse" not in values
    # Nothing is laid out for Spark's FallbackStorage any more: kept blocks are read where they are.
    assert not any(key.startswith("spark.storage.decommission") for key in values)
    # Executors report kept map outputs to the driver through Spark's plugin API.
    assert setup.appended == {"spark.plugins": KEEPING_PLUGIN_CLASS}
    # A local master loses no executor: Spark's own shuffle storage plugin stays.
    assert "spark.shuffle.sort.io.plugin.class" not in values and "spark.sparkrecover.shuffle.serve" not in values


def test_auto_keeps_nothing_on_a_cluster_with_a_local_run_directory_and_says_what_to_do(tmp_path, app):
    parsed = split_submit_args(["--master", "spark://head:7077", app])
    setup = shuffles.setup(parsed, str(tmp_path / "run"), "auto", jar="/x.jar", spark_version="4.3.0-scala2.13")
    assert setup.options == [] and setup.tell and "\n" not in (setup.reason or "")
    assert "--keep-shuffles copy" in (setup.reason or "") and "--root s3://" in (setup.reason or "")
    copying = shuffles.setup(parsed, str(tmp_path / "run"), "copy", jar="/x.jar", spark_version="4.3.0-scala2.13")
    assert copying.reason is None and confs(copying)["spark.sparkrecover.shuffle.mode"] == "copy"
    assert "spark.executor.extraClassPath" not in copying.appended  # Spark 4 loads it from --jars


@pytest.mark.parametrize("master", ["local[2]", "spark://head:7077", "yarn"])
def test_auto_copies_to_a_run_directory_on_shared_storage_under_its_hadoop_name(app, master):
    parsed = split_submit_args(["--master", master, app])
    setup = shuffles.setup(parsed, "s3://bucket/runs/night", "auto", jar="/x.jar", spark_version="4.3.0-scala2.13")
    assert setup.reason is None and setup.mode == "copy"
    values = confs(setup)
    assert values["spark.sparkrecover.shuffle.dir"] == "s3a://bucket/runs/night/shuffles"
    assert values["spark.sparkrecover.shuffle.mode"] == "copy"
    link = shuffles.setup(parsed, "s3://bucket/runs/night", "link", jar="/x.jar")
    assert link.options == [] and "--keep-shuffles copy" in (link.reason or "")


@pytest.mark.parametrize(
    ("options", "serves"),
    [
        ([], True),
        (["--conf", "spark.dynamicAllocation.enabled=true"], False),
        (["--conf", "spark.shuffle.service.enabled=true"], False),
        (["--conf", "spark.shuffle.sort.io.plugin.class=org.example.OwnShuffleDataIO"], False),
    ],
)
def test_a_cluster_serves_a_lost_executors_map_outputs_from_their_copies(app, options, serves):
    """On a cluster the driver serves a lost executor's kept map outputs (docs/shuffles.md), unless
    the application names its own shuffle storage plugin, uses dynamic allocation or the external
    shuffle service."""
    parsed = split_submit_args(["--master", "spark://head:7077", *options, app])
    values = confs(shuffles.setup(parsed, "s3://bucket/runs/night", "auto", jar="/x.jar", spark_version="4.3.0"))
    assert values["spark.sparkrecover.shuffle.mode"] == "copy"
    assert (values.get("spark.shuffle.sort.io.plugin.class") == KEEPING_IO_CLASS) is serves
    assert (values.get("spark.sparkrecover.shuffle.serve") == "true") is serves


def test_spark_3_executors_get_the_jar_on_their_class_path_when_copy_asks(tmp_path, app):
    parsed = split_submit_args(["--master", "spark://head:7077", app])
    auto = shuffles.setup(parsed, "hdfs://nn/runs/night", "auto", jar="/x.jar", spark_version="3.5.9-scala2.12")
    assert auto.options == [] and "class path" in (auto.reason or "")
    copying = shuffles.setup(parsed, "hdfs://nn/runs/night", "copy", jar="/x.jar", spark_version="3.5.9-scala2.12")
    assert copying.reason is None and copying.appended["spark.executor.extraClassPath"] == "/x.jar"
    local = split_submit_args(["--master", "local[2]", app])
    on_one_machine = shuffles.setup(local, "hdfs://nn/runs/night", "auto", jar="/x.jar", spark_version="3.5.9")
    assert on_one_machine.reason is None and "spark.executor.extraClassPath" not in on_one_machine.appended


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--conf", "spark.shuffle.manager=org.apache.celeborn.CelebornShuffleManager"], "its own shuffle manager"),
        (["--conf", "spark.shuffle.push.enabled=true"], "push-based shuffle"),
        (["--remote", "sc://localhost"], "Spark Connect"),
        (["--conf", "spark.io.encryption.enabled=true"], "encrypted"),
    ],
)
def test_what_cannot_keep_map_outputs_says_why_and_sets_nothing(tmp_path, app, options, says):
    parsed = split_submit_args(["--master", "local[2]", *options, app])
    for mode in ("auto", "link", "copy"):
        setup = shuffles.setup(parsed, str(tmp_path / "run"), mode, jar="/x.jar")
        assert setup.options == [] and says in (setup.reason or "")


def test_no_jar_or_a_run_directory_spark_cannot_reach_keeps_nothing(tmp_path, app):
    parsed = split_submit_args(["--master", "local[2]", app])
    assert "jar" in (shuffles.setup(parsed, str(tmp_path / "run"), "link", jar=None).reason or "")
    remote = shuffles.setup(parsed, "memory://runs/night", "copy", jar="/x.jar")
    assert remote.options == [] and "Spark cannot reach" in (remote.reason or "")
    assert shuffles.setup(parsed, str(tmp_path / "run"), "off", jar="/x.jar") == shuffles.Setup()


def test_the_plans_kept_outputs_reach_the_jvm_as_one_line_each(tmp_path, app):
    parsed = split_submit_args(["--master", "local[2]", app])
    entry = KeptMap(map=3, path="abc/map-3", data_bytes=100, index_bytes=24, records=10, row_bytes=400)
    reuse = [KeptShuffle("abc", None, [entry, KeptMap(4, "abc/map-4", 100, 24, 10, 400)])]
    setup = shuffles.setup(parsed, str(tmp_path / "run"), "link", jar="/x.jar", reuse=reuse, attempt=2)
    name = confs(setup)["spark.sparkrecover.shuffle.reuse"]
    assert name == "reuse-0002.tsv"  # in the keep folder, where a driver anywhere reads it
    with open(tmp_path / "run" / "shuffles" / name) as handle:
        assert handle.read().splitlines() == [
            "abc\t3\tabc/map-3\t100\t24\t10\t400",
            "abc\t4\tabc/map-4\t100\t24\t10\t400",
        ]


def test_kept_map_outputs_go_with_from_scratch_and_with_a_run_that_succeeds(cli, tmp_path, app):
    from tests.helpers import fake_executable

    failing = fake_executable(tmp_path / "failing" / "spark-submit", "exit 1")
    succeeding = fake_executable(tmp_path / "succeeding" / "spark-submit", "exit 0")
    keep = tmp_path / "runs" / "r1" / "shuffles"

    def kept_file():
        (keep / "abc" / "map-0").mkdir(parents=True, exist_ok=True)
        (keep / "abc" / "map-0" / "data").write_bytes(b"x")

    code, _, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", failing, "--", app)
    assert code == 1, err
    kept_file()
    code, _, err = cli("resume", "r1", "--root", "runs", "--spark-submit", failing)
    assert code == 1 and keep.is_dir(), err  # a failed attempt keeps them for the next
    code, _, err = cli("resume", "r1", "--root", "runs", "--from-scratch", "--spark-submit", failing)
    # The attempt it launched made the folder again, for its own map outputs.
    assert code == 1 and not (keep / "abc").exists(), err
    kept_file()
    code, _, err = cli("resume", "r1", "--root", "runs", "--spark-submit", succeeding)
    assert code == 0 and not keep.exists(), err


def test_submit_to_a_cluster_with_a_local_root_says_in_one_line_how_to_keep_map_outputs(cli, tmp_path, app):
    from tests.helpers import fake_executable

    fake = fake_executable(tmp_path / "bin" / "spark-submit", "exit 0")
    code, _, err = cli(
        "submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", "--master", "spark://head:7077", app
    )
    assert code == 0, err
    told = [line for line in err.splitlines() if "--keep-shuffles auto keeps nothing" in line]
    assert len(told) == 1, err
    assert "--keep-shuffles copy" in told[0] and "--root s3://" in told[0]
    # On a local master auto keeps (or is silent about why not): nothing to do there.
    code, _, err = cli("submit", "--root", "runs", "--run-id", "r2", "--spark-submit", fake, "--", app)
    assert code == 0 and "--keep-shuffles" not in err, err
