"""A lost executor's map outputs, served from their copies or computed again (docs/shuffles.md,
"An executor lost while the application runs"): the join and aggregation of
scripts/bench_shuffle_resume.py (24 map partitions, a write of 40) on two one-core workers on
loopback, one executor SIGKILLed once every map output is journaled kept and the write's tasks are
held in flight (then released), with and without serving.

    .venv/bin/python scripts/bench_executor_loss.py [--where standalone|s3] [--maps 24] [--writes 40]

``--where``: the run root a local folder both workers see (``--keep-shuffles copy``), or S3 (a moto
server on loopback). "Without serving" keeps every map output as before but names Spark's own
shuffle storage plugin, so Spark drops the lost executor's map outputs and runs their map tasks
again (what sparkrecover did before serving). Map tasks are counted from Spark's event log
(successful ShuffleMapTasks beyond one per map partition of each shuffle the journal registered),
whole-application wall time besides. Goal: 0 map tasks run again with serving. Exits 0
whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import _bench

sys.path.insert(0, _bench.REPO)

from bench_shuffle_resume import APP, Where

OWN_STORAGE = "spark.shuffle.sort.io.plugin.class=org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"


def map_tasks_run_again(events: str, run_dir: str) -> tuple[int, int]:
    """(map tasks that ran, of which beyond one per map partition) from Spark's event log and the journal."""
    from sparkrecover.journal import read_journal

    ran = 0
    for base, _, names in os.walk(events):
        for name in names:
            with open(os.path.join(base, name), encoding="utf-8") as handle:
                for line in handle:
                    if '"Event":"SparkListenerTaskEnd"' not in line:
                        continue
                    event = json.loads(line)
                    if event["Task Type"] == "ShuffleMapTask" and event["Task End Reason"]["Reason"] == "Success":
                        ran += 1
    partitions = sum(e["maps"] for e in read_journal(run_dir) if e["type"] == "shuffle.registered")
    return ran, ran - partitions


def one_loss(where: Where, work: str, name: str, maps: int, writes: int, serve: bool) -> tuple[int, int, float]:
    """Submit, kill worker 1's executor at the moment, release, wait: (map tasks, run again, wall s)."""
    from sparkrecover.core.fold.runstate import RunState
    from sparkrecover.journal import read_journal
    from sparkrecover.rundir import storage

    events, release = os.path.join(work, name, "events"), os.path.join(work, name, "release")
    os.makedirs(events)
    run_dir = storage.join(where.root, name)
    logging = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}"]
    logging += ["--conf", "spark.eventLog.compress=false", *(() if serve else ("--conf", OWN_STORAGE))]
    command = _bench.sparkrecover(
        "submit", "--root", where.root, "--run-id", name, "--keep-shuffles", "copy", "--", *where.options, *logging,
        APP, os.path.join(work, name, "out"), os.path.join(work, name, "markers"), "etl", str(maps), str(writes),
    )  # fmt: skip
    env = {**where.env, "SHUFFLE_MAP_SLEEP": "1", "SHUFFLE_WRITE_SLEEP": "1", "HOLD_TASKS": f"0:{release}"}
    markers = os.path.join(work, name, "markers")

    def moment() -> bool:
        try:
            shuffles = list(RunState.from_events(name, read_journal(run_dir)).shuffles.values())
        except Exception:  # a journal segment being written
            return False
        written = [m for m in os.listdir(markers) if m.startswith("write-")] if os.path.isdir(markers) else []
        return len(shuffles) >= 3 and all(len(s.kept) == s.maps for s in shuffles) and len(written) >= 2

    started = time.perf_counter()
    with open(os.path.join(work, "runs.log"), "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        while not moment():
            if process.poll() is not None:
                sys.exit(f"the run ended (exit {process.returncode}) before the kill; see {work}/runs.log")
            time.sleep(0.2)
        assert where.cluster is not None
        for pid in where.cluster.executors(1):
            os.kill(pid, signal.SIGKILL)
        # Released once the driver has dealt with the loss (served, or Spark told).
        seen = "shuffle.served" if serve else "executor.lost"
        while not any(e["type"] == seen for e in read_journal(run_dir)):
            time.sleep(0.2)
        open(release, "w").close()
        if process.wait() != 0:
            sys.exit(f"the run failed (exit {process.returncode}); see {work}/runs.log")
    wall = time.perf_counter() - started
    where.idle()
    ran, again = map_tasks_run_again(events, run_dir)
    return ran, again, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--where", choices=["standalone", "s3"], default="standalone")
    parser.add_argument("--maps", type=int, default=24)
    parser.add_argument("--writes", type=int, default=40)
    options = parser.parse_args()
    _bench.warm_jar()
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-executor-loss-")
    where = Where(options.where, work)
    print(
        f"bench_executor_loss: {options.maps} map partitions, a join and an aggregation, a write of "
        f"{options.writes}, one of two executors SIGKILLed after the map stages {_bench.load_note()}; logs in {work}",
        flush=True,
    )
    try:
        figures = {}
        for serve in (False, True):
            name = "served" if serve else "recomputed"
            figures[serve] = one_loss(where, work, name, options.maps, options.writes, serve)
            ran, again, wall = figures[serve]
            label = "with serving   " if serve else "without serving"
            print(f"  {label}: {ran} map tasks ran, {again} of them again after the loss; {wall:.1f} s", flush=True)
    finally:
        where.close()
    again_without, again_with = figures[False][1], figures[True][1]
    ratio = f"{again_with / again_without:.2f}" if again_without else "n/a"
    print(
        f"  map tasks run again: {again_with} with serving against {again_without} without (ratio {ratio}); "
        f"goal 0: {'met' if again_with == 0 else 'MISSED'}; wall {figures[True][2] / figures[False][2]:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
