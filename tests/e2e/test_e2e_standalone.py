"""A standalone cluster on loopback: a master and one worker started with
pyspark's own ``spark-class``, the app in client mode, the driver SIGKILLed after a stage,
resumed; the output is the one a plain run on the same cluster writes, and the killed and the
resumed applications leave nothing running on the cluster."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pyspark
import pytest

from sparkrecover.launch.launcher import find_spark_submit
from tests.helpers import PIPELINE, SPARK_OPTIONS, events_of, run_cli, submit_and_kill

pytestmark = pytest.mark.e2e
SPARK_CLASS = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "bin", "spark-class")
APP_ARGS = ["--rows", "20000"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """One master and one worker, each in its own process group (the worker's executors are its
    children, so stopping the group stops them too)."""

    def __init__(self, folder):
        self.folder = folder
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(folder / "local"),
            "PYSPARK_PYTHON": sys.executable,
        }
        self.env.pop("SPARK_HOME", None)
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        log = open(self.folder / f"{name}.log", "wb")
        self.processes.append(
            subprocess.Popen(
                [SPARK_CLASS, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.folder,
                start_new_session=True,
            )
        )
        log.close()

    def start(self) -> None:
        (self.folder / "local").mkdir()
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--cores",
            "1",
            "--memory",
            "1g",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(self.folder / "work"),
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if [w for w in self.state()["workers"] if w["state"] == "ALIVE"]:
                    return
            for process in self.processes:
                if process.poll() is not None:
                    raise AssertionError(f"a cluster process exited with {process.returncode}: see {self.folder}")
            time.sleep(0.5)
        raise AssertionError(f"no worker registered with {self.url} within 180 s: see {self.folder}")

    def state(self) -> dict:
        """The master's view of the cluster (its web UI's /json)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json", timeout=10) as answer:
            return json.load(answer)

    def idle(self, timeout: float = 60) -> dict:
        """The master's state once no application is active and no worker core is in use."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if not state["activeapps"] and all(w["coresused"] == 0 for w in state["workers"]):
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster is still busy: {state['activeapps']} {state['workers']}")
            time.sleep(0.5)

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        for process in self.processes:  # nothing of the group left: executors included
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


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
