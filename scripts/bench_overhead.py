"""Listener and bootstrap overhead (docs/design.md §9): plain spark-submit vs sparkrecover submit.

    .venv/bin/python scripts/bench_overhead.py [--tasks 20000] [--pairs 5] [--no-py4j]

Runs bench_apps/tasks.py (one Spark stage of --tasks tiny JVM tasks) alternately under plain
spark-submit and under ``sparkrecover submit``, the order flipping every pair, after one warm-up
pair that is not counted (a first use also compiles the listener's jar). Prints every pair, the
median of the per-pair ratios of wall time (goal <= 1.03) and, as a steadier second view on a
shared machine, of the CPU time the whole process tree used; and how many listener events Spark
dropped under sparkrecover (goal 0, from driver.ended). Then, for comparison, one run with the
Py4J fallback listener (SPARKRECOVER_NO_JVM_LISTENER=1). Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import _bench

GOAL_RATIO = 1.03


def submit_run(root: str, run_id: str, tasks: int, log: str, env: dict | None = None) -> tuple[float, float, dict]:
    command = _bench.sparkrecover(
        "submit",
        "--root",
        root,
        "--run-id",
        run_id,
        "--spark-submit",
        _bench.spark_submit(),
        "--",
        *_bench.SPARK_OPTIONS,
        os.path.join(_bench.APPS, "tasks.py"),
        str(tasks),
    )
    wall, cpu = _bench.timed_cpu(command, log, env)
    from sparkrecover.journal import read_journal

    ended = [r for r in read_journal(os.path.join(root, run_id)) if r["type"] == "driver.ended"]
    return wall, cpu, ended[-1] if ended else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--no-py4j", action="store_true", help="skip the Py4J comparison run")
    options = parser.parse_args()
    _bench.warm_jar()
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-overhead-")
    log, root = os.path.join(work, "runs.log"), os.path.join(work, "root")
    plain = [_bench.spark_submit(), *_bench.SPARK_OPTIONS, os.path.join(_bench.APPS, "tasks.py"), str(options.tasks)]
    print(
        f"bench_overhead: {options.tasks} tasks on local[2], {options.pairs} pairs after a warm-up "
        f"pair {_bench.load_note()}; logs in {log}",
        flush=True,
    )

    ratios, cpu_ratios, plains, dropped, listeners = [], [], [], [], set()
    for pair in range(options.pairs + 1):
        times, cpus = {}, {}
        for kind in ("plain", "sparkrecover") if pair % 2 == 0 else ("sparkrecover", "plain"):
            if kind == "plain":
                times[kind], cpus[kind] = _bench.timed_cpu(plain, log, _bench.plain_env())
            else:
                times[kind], cpus[kind], ended = submit_run(root, f"pair-{pair}", options.tasks, log)
                if pair:
                    dropped.append(ended.get("spark_events_dropped"))
                    listeners.add(ended.get("listener"))
        ratio, cpu_ratio = times["sparkrecover"] / times["plain"], cpus["sparkrecover"] / cpus["plain"]
        label = "warm-up" if pair == 0 else f"pair {pair}"
        print(
            f"  {label:8} plain {times['plain']:7.2f} s ({cpus['plain']:6.1f} s CPU)   sparkrecover "
            f"{times['sparkrecover']:7.2f} s ({cpus['sparkrecover']:6.1f} s CPU)   ratio {ratio:.3f} "
            f"(CPU {cpu_ratio:.3f}) {_bench.load_note()}",
            flush=True,
        )
        if pair:
            ratios.append(ratio)
            cpu_ratios.append(cpu_ratio)
            plains.append(times["plain"])

    median = _bench.median(ratios)
    worst = max((d for d in dropped if d is not None), default=None)
    print(
        f"median ratio: {median:.3f} (goal <= {GOAL_RATIO}): {_bench.verdict(median, GOAL_RATIO)}; "
        f"median CPU-time ratio: {_bench.median(cpu_ratios):.3f}"
    )
    print(
        f"events dropped by Spark under sparkrecover (listener {'/'.join(sorted(map(str, listeners)))}): "
        f"{worst} (goal 0): {'met' if worst == 0 else 'MISSED'}"
    )
    if not options.no_py4j:
        env = {**os.environ, "SPARKRECOVER_NO_JVM_LISTENER": "1"}
        seconds, _, ended = submit_run(root, "py4j", options.tasks, log, env)
        print(
            f"for comparison, the Py4J fallback listener: {seconds:.2f} s "
            f"(ratio {seconds / _bench.median(plains):.3f} to the median plain run), "
            f"events dropped by Spark: {ended.get('spark_events_dropped')}"
        )
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
