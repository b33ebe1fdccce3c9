"""A standalone cluster on loopback: a master and one worker started with
pyspark's own ``spark-class``, the app in client mode, the driver SIGKILLed after a stage,
resumed; the output is the one a plain run on the same cluster writes, and the killed and the
resumed applications leave nothing running on the cluster."""

from __future__ import annotations

import subprocess

import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.cluster import Cluster
from tests.e2e.support import PIPELINE, submit_and_kill
from tests.helpers import SPARK_OPTIONS, events_of, run_cli

pytestmark = pytest.mark.e2e
APP_ARGS = ["--rows", "20000"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_a_driver_killed_on_a_standalone_cluster_resumes_to_the_same_output(tmp_path, cluster):
    # SPARK_OPTIONS says local[2]; spark-submit (and sparkrecover) take the last --master given.
    on_cluster = ["--master", cluster.url]
    plain = subprocess.run(
        [find_spark_submit(), *SPARK_OPTIONS, *on_cluster, PIPELINE, str(tmp_path / "plain"), *APP_ARGS],
        capture_output=True,
        text=True,
        timeout=600,
        env=cluster.env,
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    expected = (tmp_path / "plain" / "report.txt").read_text()

    root, out = str(tmp_path / "root"), str(tmp_path / "out")
    run_dir = submit_and_kill(
        root, "standalone", [out, *APP_ARGS], after_stage="clean", spark_options=on_cluster, env=cluster.env
    )
    cluster.idle()  # the killed driver's executors are released

    result = run_cli("resume", "standalone", "--root", root, env=cluster.env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "report.txt").read_text() == expected
    events = events_of(run_dir)
    assert [(e["attempt"], e["master"]) for e in events if e["type"] == "driver.started"] == [
        (1, cluster.url),
        (2, cluster.url),
    ]
    second = [e for e in events if e["attempt"] == 2]
    assert [e["stage"] for e in second if e["type"] == "stage.skipped"] == ["orders", "clean"]
    assert [e["stage"] for e in second if e["type"] == "stage.committed"] == ["daily", "publish"]

    state = cluster.idle()
    ids = {e["app_id"] for e in events if e["type"] == "driver.started"}
    assert ids <= {app["id"] for app in state["completedapps"]}
    assert len(state["completedapps"]) == 3  # the plain run, the killed one, the resumed one


def test_cluster_deploy_mode_for_a_python_app_is_refused_before_launch(tmp_path, cluster):
    before = len(cluster.state()["completedapps"])
    result = run_cli(
        "submit",
        "--root",
        str(tmp_path / "root"),
        "--",
        "--master",
        cluster.url,
        "--deploy-mode",
        "cluster",
        PIPELINE,
        str(tmp_path / "out"),
        env=cluster.env,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Spark runs Python apps on standalone in client mode only" in result.stderr
    assert not (tmp_path / "root").exists() and not (tmp_path / "out").exists()
    state = cluster.state()
    assert not state["activeapps"] and len(state["completedapps"]) == before
    assert not state.get("activedrivers") and not state.get("completeddrivers")
