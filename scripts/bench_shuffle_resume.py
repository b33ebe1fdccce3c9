"""Shuffles (DESIGN §9): a join and an aggregation whose map side is ~24 partitions of ~1 s, then a
write of ~40 partitions of ~1 s; killed half-way through the map stage, then resumed.

    .venv/bin/python scripts/bench_shuffle_resume.py [--maps 24] [--seconds 1.0] [--keep-cost]

1. The app (tests/apps/shuffle_job.py, variant ``join``, written with ``df.write.parquet``: each map
   partition's first row sleeps, and so does each result row) under ``sparkrecover submit``,
   uninterrupted: the full run.
2. The same under plain ``spark-submit``: what a plain re-submission after a crash costs.
3. ``sparkrecover submit``, its process group SIGKILLed once half of the map partitions have
   started; then ``sparkrecover resume``, timed from launch to exit, counting the map partitions
   it computed (the app marks each one it computes) against the kept ones the journal recorded.
4. With ``--keep-cost``: clean runs with ``--keep-shuffles off``, ``link`` and ``copy``, to show
   what keeping costs.

Goal: killed at 50 % of the map stage, at most the unfinished map partitions + 2 computed (so at
most 50 % + 2). Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import _bench

APP = os.path.join(_bench.REPO, "tests", "apps", "shuffle_job.py")
ROWS = 1000  # rows per input file (the app's ROWS)


def prepare(source: str, maps: int) -> None:
    """One Parquet file per map partition (ids from ``p * ROWS``), and the join's other side."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.range(0, maps * ROWS, numPartitions=maps).write.parquet(os.path.join(source, "left"))
    spark.range(0, 97).selectExpr("id AS rid", "id * 2 AS weight").coalesce(1).write.parquet(
        os.path.join(source, "right")
    )
    spark.stop()


def started_maps(markers: str, since_ns: int = 0) -> int:
    if not os.path.isdir(markers):
        return 0
    return sum(1 for name in os.listdir(markers) if name.startswith("m-") and int(name.rsplit("-", 1)[1]) > since_ns)


def kept_maps(run_dir: str) -> int:
    from sparkrecover.core.runstate import RunState
    from sparkrecover.journal import read_journal

    state = RunState.from_events(os.path.basename(run_dir), read_journal(run_dir))
    return sum(shuffle.kept_count for shuffle in state.shuffles.values())


def keep_times(run_dir: str) -> tuple[int, float, int]:
    """(map outputs kept, mean microseconds an executor took to keep one, bytes kept) of a run."""
    from sparkrecover.journal import read_journal

    maps = [m for e in read_journal(run_dir) if e["type"] == "shuffle.committed" for m in e["maps"]]
    times = [int(m.get("keep_us") or 0) for m in maps]
    return len(maps), (sum(times) / len(times) if times else 0.0), sum(int(m["data_bytes"]) for m in maps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--keep-cost", action="store_true", help="also time clean runs with each --keep-shuffles")
    options = parser.parse_args()
    maps = options.maps
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-shuffle-")
    log, root, source = os.path.join(work, "runs.log"), os.path.join(work, "root"), os.path.join(work, "in")
    env = {
        **os.environ,
        "SHUFFLE_JOB_MAP_SLEEP": str(options.seconds),
        "SHUFFLE_JOB_RESULT_SLEEP": str(options.seconds),
        "SHUFFLE_JOB_KEYS": "32",
        "SHUFFLE_JOB_REDUCES": "40",
    }
    prepare(source, maps)
    print(
        f"bench_shuffle_resume: {maps} map partitions x {options.seconds:.1f} s, a join and an aggregation, "
        f"a write of 40 partitions on local[2] {_bench.load_note()}; logs in {log}",
        flush=True,
    )

    def app(name: str) -> list[str]:
        folder = os.path.join(work, name)
        return [APP, source, os.path.join(folder, "out"), os.path.join(folder, "markers"), "join", "write"]

    def submit(name: str, *extra: str) -> list[str]:
        return _bench.sparkrecover(
            "submit", "--root", root, "--run-id", name, "--flush-interval", "0.2", *extra, "--", *_bench.SPARK_OPTIONS
        ) + app(name)

    full = _bench.timed(submit("full"), log, env)
    print(f"  full run under sparkrecover submit: {full:.2f} s", flush=True)
    plain = _bench.timed(
        [_bench.spark_submit(), *_bench.SPARK_OPTIONS, *app("plain")], log, {**_bench.plain_env(), **env}
    )
    print(f"  plain re-submission (plain spark-submit): {plain:.2f} s = {plain / full:.3f} x the full run", flush=True)

    name, target = "kill-map50", maps // 2
    markers = os.path.join(work, name, "markers")
    with open(log, "ab") as handle:
        child = subprocess.Popen(submit(name), stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        while started_maps(markers) < target:
            if child.poll() is not None:
                sys.exit(f"the run ended (exit {child.returncode}) before {target} map partitions started; see {log}")
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    killed_at = time.time_ns()
    kept = kept_maps(os.path.join(root, name))
    resume = _bench.timed(_bench.sparkrecover("resume", name, "--root", root), log, env)
    computed = started_maps(markers, killed_at)
    allowed = maps - target + 2
    print(
        f"killed at 50 % of the map stage ({target}/{maps} map partitions started, {kept} kept): resume "
        f"computed {computed} map partitions (at most {allowed}: {_bench.verdict(computed, allowed)}), "
        f"{resume:.2f} s = {resume / full:.3f} x the full run",
        flush=True,
    )
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)

    if options.keep_cost:
        for mode in ("off", "link", "copy"):
            took = _bench.timed(submit(f"keep-{mode}", "--keep-shuffles", mode), log, env)
            print(
                f"  clean run with --keep-shuffles {mode}: {took:.2f} s = {took / full:.3f} x the full run", flush=True
            )
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
