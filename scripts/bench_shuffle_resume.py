"""Shuffles and task-level resume (docs/design.md §9): a join and an aggregation over a map side of
24 partitions of about 1 s each, then one write of 40 partitions of about 1 s each, killed after 70 %
of the write's partitions committed, and killed half-way through the map stage, then resumed.

    .venv/bin/python scripts/bench_shuffle_resume.py [--maps 24] [--writes 40] [--seconds 1.0] [--keep-cost]

1. The app (tests/apps/shuffle_write.py, shape ``etl``: each map task and each post-shuffle task
   sleeps once and leaves a marker) under ``sparkrecover submit``, uninterrupted: the full run.
2. The same under plain ``spark-submit``: a plain re-submission after a crash, and the clean-run
   overhead of ``submit`` (wall and CPU of the whole process tree).
3. For each kill point: ``sparkrecover submit``, its process group SIGKILLed there; then
   ``sparkrecover resume``, timed from launch to exit, counting the map and write partitions it
   computed (from the markers).
4. With ``--keep-cost``: clean runs with each ``--keep-shuffles`` (off, link, copy), with the time
   the executors took to keep each map output (``keep_us`` in the journal, docs/shuffles.md).

Goals: killed at 70 % of the write, at most 30 % + 4 write partitions computed and at most 0.45x
the full run (0 map partitions once shuffle map outputs are kept); killed at 50 % of the map stage,
at most 50 % + 2 map partitions computed; clean-run overhead at most 1.05x. Exits 0 whatever the
figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import _bench

APP = os.path.join(_bench.REPO, "tests", "apps", "shuffle_write.py")
RATIO_GOAL, OVERHEAD_GOAL = 0.45, 1.05


def write_commits(run_dir: str) -> int:
    """Write partitions the first attempt committed, as the run's own fold reads the journal."""
    from sparkrecover.core.runstate import RunState
    from sparkrecover.journal import read_journal

    state = RunState.from_events(os.path.basename(run_dir), read_journal(run_dir))
    return sum(1 for stage in state.stages.values() for by, _ in stage.committed_tasks.values() if by == 1)


def marked(markers: str, kind: str, since_ns: int = 0) -> int:
    """Tasks of ``kind`` (map, write) that computed their partition after ``since_ns``."""
    if not os.path.isdir(markers):
        return 0
    return sum(1 for name in os.listdir(markers) if name.split("-")[0] == kind and int(name.split("-")[3]) > since_ns)


def keep_times(run_dir: str) -> tuple[int, float, int]:
    """(map outputs kept, mean microseconds an executor took to keep one, bytes kept) of a run."""
    from sparkrecover.journal import read_journal

    kept = [m for e in read_journal(run_dir) if e["type"] == "shuffle.committed" for m in e["maps"]]
    times = [int(m.get("keep_us") or 0) for m in kept]
    return len(kept), (sum(times) / len(times) if times else 0.0), sum(int(m["data_bytes"]) for m in kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", type=int, default=24)
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--keep-cost", action="store_true", help="also time clean runs with each --keep-shuffles")
    options = parser.parse_args()
    _bench.warm_jar()
    maps, writes = options.maps, options.writes
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-shuffle-resume-")
    log, root = os.path.join(work, "runs.log"), os.path.join(work, "root")
    seconds = str(options.seconds)
    env = {**os.environ, "SHUFFLE_MAP_SLEEP": seconds, "SHUFFLE_WRITE_SLEEP": seconds}
    print(
        f"bench_shuffle_resume: {maps} map partitions, a join and an aggregation, a write of {writes} "
        f"partitions, x {options.seconds:.1f} s each on local[2] {_bench.load_note()}; logs in {log}",
        flush=True,
    )

    def app(name: str) -> list[str]:
        return [
            APP,
            os.path.join(work, name, "out"),
            os.path.join(work, name, "markers"),
            "etl",
            str(maps),
            str(writes),
        ]

    full, full_cpu = _bench.timed_cpu(
        _bench.sparkrecover("submit", "--root", root, "--run-id", "full", "--", *_bench.SPARK_OPTIONS, *app("full")),
        log,
        env,
    )
    counted = (
        marked(os.path.join(work, "full", "markers"), "map"),
        marked(os.path.join(work, "full", "markers"), "write"),
    )
    print(
        f"  full run under sparkrecover submit: {full:.2f} s ({counted[0]} map, {counted[1]} write partitions computed)"
    )
    plain, plain_cpu = _bench.timed_cpu(
        [_bench.spark_submit(), *_bench.SPARK_OPTIONS, *app("plain")], log, {**_bench.plain_env(), **env}
    )
    plain_counted = (
        marked(os.path.join(work, "plain", "markers"), "map"),
        marked(os.path.join(work, "plain", "markers"), "write"),
    )
    overhead = full / plain
    print(
        f"  plain spark-submit: {plain:.2f} s ({plain_counted[0]} map, {plain_counted[1]} write partitions "
        f"computed; the same under submit: {'met' if counted == plain_counted else 'MISSED'})\n"
        f"  clean-run overhead of submit: {overhead:.3f} x wall (goal <= {OVERHEAD_GOAL}: "
        f"{_bench.verdict(overhead, OVERHEAD_GOAL)}), {full_cpu / plain_cpu:.3f} x CPU\n"
        f"  plain re-submission after a crash (whole job): {plain / full:.3f} x the full run",
        flush=True,
    )

    def kill_and_resume(
        name: str,
        label: str,
        until: Callable[[str, str], bool],
        allowed: tuple[int, int],
        ratio_goal: float | None = RATIO_GOAL,
    ) -> None:
        run_dir, markers = os.path.join(root, name), os.path.join(work, name, "markers")
        command = _bench.sparkrecover(
            "submit",
            "--root",
            root,
            "--run-id",
            name,
            "--flush-interval",
            "0.2",
            "--",
            *_bench.SPARK_OPTIONS,
            *app(name),
        )
        with open(log, "ab") as handle:
            child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env)
            while not until(run_dir, markers):
                if child.poll() is not None:
                    sys.exit(f"the run ended (exit {child.returncode}) before the kill point; see {log}")
                time.sleep(0.05)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        killed_at = time.time_ns()
        resume = _bench.timed(_bench.sparkrecover("resume", name, "--root", root), log, env)
        computed_maps, computed_writes = marked(markers, "map", killed_at), marked(markers, "write", killed_at)
        ratio = resume / full
        print(
            f"killed {label}: resume computed {computed_maps} map partitions (at most {allowed[0]}: "
            f"{_bench.verdict(computed_maps, allowed[0])}) and {computed_writes} write partitions (at most "
            f"{allowed[1]}: {_bench.verdict(computed_writes, allowed[1])}), {resume:.2f} s = {ratio:.3f} x the "
            f"full run" + (f" (goal <= {ratio_goal}: {_bench.verdict(ratio, ratio_goal)})" if ratio_goal else ""),
            flush=True,
        )

    target = round(writes * 0.7)
    kill_and_resume(
        "write70",
        f"at 70 % of the write ({target}/{writes} commits journaled)",
        lambda run_dir, _markers: write_commits(run_dir) >= target,
        (0, writes - target + 4),
    )
    half = maps // 2
    kill_and_resume(
        "map50",
        f"at 50 % of the map stage ({half}/{maps} map partitions started)",
        lambda _run_dir, markers: marked(markers, "map") >= half,
        (maps - half + 2, writes),
        ratio_goal=None,
    )
    if options.keep_cost:
        for mode in ("off", "link", "copy"):
            name = f"keep-{mode}"
            took = _bench.timed(
                _bench.sparkrecover(
                    "submit", "--root", root, "--run-id", name, "--keep-shuffles", mode, "--", *_bench.SPARK_OPTIONS
                )
                + app(name),
                log,
                env,
            )
            count, mean_us, size = keep_times(os.path.join(root, name))
            print(
                f"  clean run with --keep-shuffles {mode}: {took:.2f} s = {took / full:.3f} x the full run; "
                f"{count} map outputs kept ({size:,} bytes), {mean_us / 1000:.2f} ms each on the map task's thread",
                flush=True,
            )
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
