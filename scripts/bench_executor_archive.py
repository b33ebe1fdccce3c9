"""Executors' start on a cluster, with and without a class-data-sharing archive (docs/operations.md,
"Executors on a cluster"): does an archive for executors pay?

    .venv/bin/python scripts/bench_executor_archive.py [--pairs 3]

On the tests' standalone cluster (tests/cluster.py: a master and two one-core workers on loopback,
each with its own local directories), with no JVM options of the tests' own (SPARK_SUBMIT_OPTS is
left out, so master, workers and drivers start as a user's do):

1. One application with a single executor (``spark.cores.max=1``) started with
   ``-XX:+RecordDynamicDumpInfo``, whose archive ``jcmd <pid> VM.cds dynamic_dump`` writes once its
   job is done, as an operator would make one on one node (``-XX:ArchiveClassesAtExit`` writes it
   as the JVM exits, which the worker cuts short after 10 s: too short on a loaded machine); then
   one untimed application that maps it, whose class-loading log says how many of the executor's
   classes came from the archive.
2. ``--pairs`` pairs, the order flipping every pair, of the same application (bench_apps/
   executors_ready.py: both executors registered, one small job with a task on each) without and
   with ``-XX:SharedArchiveFile=…`` in ``spark.executor.extraJavaOptions``. For each executor JVM:
   its start (from the process's start, /proc, to its registration with the driver, the event
   log's ``SparkListenerExecutorAdded``) and its CPU (user + system, /proc) once the job is done.

Prints every pair and the medians of the per-pair ratios (with / without) of the executors' start
and CPU. Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench

sys.path.insert(0, _bench.REPO)

APP = os.path.join(_bench.APPS, "executors_ready.py")
TICKS = os.sysconf("SC_CLK_TCK")


def boot_time() -> float:
    with open("/proc/stat") as handle:
        return next(float(line.split()[1]) for line in handle if line.startswith("btime "))


def process_times(pid: int) -> tuple[float, float]:
    """(start, epoch seconds; CPU seconds, user + system) of a live process."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return boot_time() + int(fields[19]) / TICKS, (int(fields[11]) + int(fields[12])) / TICKS


def registrations(events: str) -> dict[str, float]:
    """Executor id -> when it registered with the driver (epoch seconds), from the event log: a file,
    or on Spark 4 with rolling on a folder of files."""
    found: dict[str, float] = {}
    for app in os.listdir(events):
        path = os.path.join(events, app)
        files = [os.path.join(path, name) for name in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
        for file in files:
            with open(file, encoding="utf-8") as handle:
                for line in handle:
                    if '"SparkListenerExecutorAdded"' not in line:
                        continue
                    event = json.loads(line)
                    if event.get("Event") == "SparkListenerExecutorAdded":
                        found[str(event["Executor ID"])] = event["Timestamp"] / 1000
    return found


class Bench:
    def __init__(self, work: Path):
        from tests.cluster import Cluster

        self.work, self.log = work, str(work / "runs.log")
        self.cluster = Cluster(work / "cluster", workers=2)
        self.runs = iter(range(1_000_000))

    def run(
        self, java_options: str, cores: int = 2, dump: Path | None = None
    ) -> tuple[float, list[tuple[float, float]]]:
        """One application: (seconds from its launch to its job's end, [(start s, CPU s) per executor]);
        with ``dump``, its executors' classes archived there once the job is done."""
        name = f"app-{next(self.runs)}"
        events, ready, go = self.work / name / "events", self.work / name / "ready", self.work / name / "go"
        events.mkdir(parents=True)
        options = [
            "--master", self.cluster.url, "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.cores.max={cores}",
            "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
            "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
            "--conf", "spark.eventLog.compress=false",
            "--driver-java-options", f"-Dlog4j2.configurationFile={_bench.QUIET_LOG4J}",
        ]  # fmt: skip
        if java_options:
            options += ["--conf", f"spark.executor.extraJavaOptions={java_options}"]
        command = [_bench.spark_submit(), *options, APP, str(ready), str(go)]
        with open(self.log, "ab") as handle:
            handle.write(f"\n$ {' '.join(command)}\n".encode())
            handle.flush()
            started = time.monotonic()
            child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=self.cluster.env)
            while not ready.exists():
                if child.poll() is not None:
                    sys.exit(f"the application ended (exit {child.returncode}) before its job; see {self.log}")
                time.sleep(0.05)
            took = time.monotonic() - started
            live = {}  # executor id -> its JVM's (start, CPU), read while it lives
            for worker in range(self.cluster.workers):
                apps = sorted((self.cluster.folder / f"work-{worker}").glob("app-*"), key=os.path.getmtime)
                ids = sorted(entry.name for entry in apps[-1].iterdir()) if apps else []
                for pid, executor in zip(self.cluster.executors(worker), ids[-1:], strict=False):
                    live[executor] = process_times(pid)
                    if dump is not None:
                        command = ["jcmd", str(pid), "VM.cds", "dynamic_dump", str(dump)]
                        subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, timeout=600, check=True)
            go.touch()
            if child.wait() != 0:
                sys.exit(f"the application failed (exit {child.returncode}); see {self.log}")
        self.cluster.idle(timeout=120)
        registered = registrations(str(events))
        return took, [(registered[e] - start, cpu) for e, (start, cpu) in sorted(live.items()) if e in registered]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("SPARK_SUBMIT_OPTS", None)  # the cluster's daemons and drivers as a user's
    work = Path(tempfile.mkdtemp(prefix="bench-executor-archive-"))
    archive = work / "executor.jsa"
    bench = Bench(work)
    print(f"executors' start with and without a class archive, two one-core workers {_bench.load_note()}")
    bench.cluster.start()
    try:
        bench.run("")  # untimed: a fresh cluster's first application starts slower than the next
        bench.run("-XX:+RecordDynamicDumpInfo", cores=1, dump=archive)
        if not archive.exists():
            sys.exit(f"the executor wrote no archive; see {bench.cluster.folder}")
        use = f"-XX:SharedArchiveFile={archive}"
        classes = work / "classes.log"
        bench.run(f"{use} -Xlog:class+load=info:file={classes}", cores=1)
        lines = classes.read_text(errors="replace").splitlines()
        shared = sum("shared objects file" in line for line in lines)
        print(f"archive: {archive.stat().st_size / 1e6:.0f} MB; an executor mapping it loaded {shared} of "
              f"{len(lines)} classes from it")  # fmt: skip
        starts, cpus = [], []
        for pair in range(args.pairs):
            order = [("without", ""), ("with", use)]
            measured = dict((label, bench.run(options)) for label, options in (order if pair % 2 else order[::-1]))
            (plain_took, plain), (ours_took, ours) = measured["without"], measured["with"]
            start = statistics.median(s for s, _ in ours) / statistics.median(s for s, _ in plain)
            cpu = statistics.median(c for _, c in ours) / statistics.median(c for _, c in plain)
            starts.append(start)
            cpus.append(cpu)
            print(
                f"  pair {pair + 1}: executor start {', '.join(f'{s:.2f}' for s, _ in ours)} s with, "
                f"{', '.join(f'{s:.2f}' for s, _ in plain)} s without ({start:.3f}x); executor CPU "
                f"{', '.join(f'{c:.2f}' for _, c in ours)} s with, {', '.join(f'{c:.2f}' for _, c in plain)} s "
                f"without ({cpu:.3f}x); application to its job's end {ours_took:.2f} s with, {plain_took:.2f} s "
                f"without ({ours_took / plain_took:.3f}x)",
                flush=True,
            )
        print(
            f"median over {args.pairs} pairs: executor start {_bench.median(starts):.3f}x, executor CPU "
            f"{_bench.median(cpus):.3f}x with the archive {_bench.load_note()}"
        )
    finally:
        bench.cluster.stop()
    print(f"log: {bench.log}")


if __name__ == "__main__":
    main()
