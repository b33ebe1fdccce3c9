"""A standalone Spark cluster on loopback for tests: a master and N workers started with pyspark's
own ``spark-class``, each worker with its own ``SPARK_LOCAL_DIRS`` (so its executors' shuffle
files are its own, as on separate machines) and its own work folder. Each process runs in its
own process group: a worker's executors are its children, so stopping the group stops them too.
"""

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
from pathlib import Path

import pyspark

SPARK_CLASS = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "bin", "spark-class")
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """One master and ``workers`` workers of one core and 1 GiB each."""

    def __init__(self, folder: Path, workers: int = 1):
        self.folder = folder
        self.workers = workers
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        # What the tests' drivers (client mode) run with; each worker gets its own local folder.
        self.env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(folder / "local"),
            "PYSPARK_PYTHON": sys.executable,
        }
        self.env.pop("SPARK_HOME", None)
        # The master, the workers and the executors they start (which inherit a worker's
        # environment) run with the JVM options of the tests' spark-submits (tests/conftest.py: C1
        # only, the serial collector, Spark's classes from the class archive), so that an executor
        # costs about half the CPU, as a driver does; their output, the JVM's line that names the
        # options among it, goes to the cluster's logs, which no test compares.
        options = os.environ.get("SPARK_SUBMIT_OPTS", "")
        self.daemon_env = {**self.env, **({"JAVA_TOOL_OPTIONS": options} if options else {})}
        self.processes: list[subprocess.Popen] = []

    def worker_local_dir(self, index: int) -> Path:
        return self.folder / f"local-{index}"

    def _start(self, name: str, *args: str, env: dict[str, str]) -> None:
        log = open(self.folder / f"{name}.log", "wb")
        self.processes.append(
            subprocess.Popen(
                [SPARK_CLASS, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.folder,
                start_new_session=True,
            )
        )
        log.close()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
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
            env=self.daemon_env,
        )
        for index in range(self.workers):
            self.worker_local_dir(index).mkdir()
            self._start(
                f"worker-{index}",
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
                str(self.folder / f"work-{index}"),
                env={**self.daemon_env, "SPARK_LOCAL_DIRS": str(self.worker_local_dir(index))},
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if len([w for w in self.state()["workers"] if w["state"] == "ALIVE"]) >= self.workers:
                    return
            for process in self.processes:
                if process.poll() is not None:
                    raise AssertionError(f"a cluster process exited with {process.returncode}: see {self.folder}")
            time.sleep(0.5)
        raise AssertionError(f"{self.workers} workers did not register with {self.url} within 180 s: see {self.folder}")

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

    def executors(self, worker: int) -> list[int]:
        """The process ids of the executor JVMs worker ``worker`` runs now (its children)."""
        pid = self.processes[1 + worker].pid
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read()
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid and EXECUTOR_CLASS.encode() in command:
                found.append(int(entry))
        return found

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
        # Each application's executors copy its jars into their worker's work folder (the s3a jars
        # alone are ~200 MB an executor): gigabytes over a few runs, which once filled this
        # machine's disk. The workers' logs stay.
        for index in range(self.workers):
            for jar in (self.folder / f"work-{index}").glob("app-*/*/*.jar"):
                with contextlib.suppress(OSError):
                    jar.unlink()
