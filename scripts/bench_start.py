"""Driver start (docs/design.md §9): a trivial application under ``sparkrecover submit``
and a resume with nothing left to do, each against plain spark-submit of the same application.

    .venv/bin/python scripts/bench_start.py [--pairs 4] [--no-class-archive]

bench_apps/count.py counts 10 rows and writes them. In a cache folder of its own (so the driver's
class archive is made from scratch, as on a first use; the listener's jar built before anything is
timed): one plain spark-submit against one ``sparkrecover submit``, the first use (its driver has
no archive yet; the archive is made after it in the background, which is waited for and timed);
then --pairs alternating pairs, the order flipping
every pair, of ``submit`` against plain spark-submit; then --pairs pairs of a ``resume`` of a run
whose driver wrote and then failed (untimed) against plain spark-submit. Prints every pair and the
medians of the per-pair ratios of wall time and of the CPU time of the whole process tree (goal
<= 0.70 for both). --no-class-archive measures the same without the archive. Exits 0 whatever
the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import _bench

GOAL_RATIO = 0.70
APP = os.path.join(_bench.APPS, "count.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--no-class-archive", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-start-")
    log = os.path.join(work, "bench.log")
    env = {**os.environ, "SPARKRECOVER_CACHE": os.path.join(work, "cache")}
    if env.pop("SPARK_SUBMIT_OPTS", None):
        print("SPARK_SUBMIT_OPTS is set: left out here (an archive named there would be used instead)")
    plain_env = {**_bench.plain_env(), **{k: v for k, v in env.items() if k != "SPARK_SUBMIT_OPTS"}}
    own = ["--no-class-archive"] if args.no_class_archive else []
    root = os.path.join(work, "runs")
    counter = iter(range(1_000_000))

    def plain() -> tuple[float, float]:
        output = os.path.join(work, f"plain-{next(counter)}")
        return _bench.timed_cpu([_bench.spark_submit(), *_bench.SPARK_OPTIONS, APP, output], log, plain_env)

    def submit(*app_args: str, check: bool = True) -> tuple[float, float]:
        command = _bench.sparkrecover("submit", "--root", root, *own, "--", *_bench.SPARK_OPTIONS, APP, *app_args)
        return _bench.timed_cpu(command, log, env) if check else _untimed(command, log, env)

    def resume() -> tuple[float, float]:
        run_id = f"resume-{next(counter)}"
        output = os.path.join(work, run_id)
        marker = os.path.join(work, run_id + ".failed")
        command = _bench.sparkrecover(
            "submit", "--root", root, "--run-id", run_id, *own, "--", *_bench.SPARK_OPTIONS, APP, output,
            "--fail-once", marker,
        )  # fmt: skip
        _untimed(command, log, env)
        return _bench.timed_cpu(_bench.sparkrecover("resume", run_id, "--root", root, *own), log, env)

    print(
        f"driver start: sparkrecover submit vs plain spark-submit of {os.path.basename(APP)}, local[2]",
        _bench.load_note(),
    )
    _warm_jar(env)  # the listener's jar is compiled once per Spark and release, not per archive
    reference = plain()  # before the first use: the archive's build starts when that has ended
    first = submit(os.path.join(work, "first"))
    print(
        f"first use (no archive yet): submit {first[0]:.2f} s wall, {first[1]:.2f} s CPU; "
        f"plain {reference[0]:.2f} s, {reference[1]:.2f} s CPU ({first[0] / reference[0]:.3f}x wall)"
    )
    if not args.no_class_archive:
        print(f"archive made in the background in {_wait_for_archive(env):.0f} s after the first use")
    for name, measured in (
        ("submit", lambda: submit(os.path.join(work, f"submit-{next(counter)}"))),
        ("resume", resume),
    ):
        walls, cpus = [], []
        for pair in range(args.pairs):
            if pair % 2 == 0:
                ours, theirs = measured(), plain()
            else:
                theirs, ours = plain(), measured()
            walls.append(ours[0] / theirs[0])
            cpus.append(ours[1] / theirs[1])
            print(
                f"  {name} pair {pair + 1}: {ours[0]:.2f} s vs {theirs[0]:.2f} s wall ({walls[-1]:.3f}x), "
                f"{ours[1]:.2f} s vs {theirs[1]:.2f} s CPU ({cpus[-1]:.3f}x)"
            )
        wall, cpu = _bench.median(walls), _bench.median(cpus)
        print(
            f"{name}: median {wall:.3f}x wall, {cpu:.3f}x CPU of plain spark-submit "
            f"(goal <= {GOAL_RATIO}: {_bench.verdict(max(wall, cpu), GOAL_RATIO)}) {_bench.load_note()}"
        )
    print(f"log: {log}")


def _warm_jar(env: dict[str, str]) -> None:
    saved = os.environ.get("SPARKRECOVER_CACHE")
    os.environ["SPARKRECOVER_CACHE"] = env["SPARKRECOVER_CACHE"]
    try:
        _bench.warm_jar()
    finally:
        if saved is None:
            del os.environ["SPARKRECOVER_CACHE"]
        else:
            os.environ["SPARKRECOVER_CACHE"] = saved


def _untimed(command: list[str], log: str, env: dict[str, str]) -> tuple[float, float]:
    import subprocess

    with open(log, "ab") as handle:
        subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    return 0.0, 0.0


def _wait_for_archive(env: dict[str, str]) -> float:
    """Seconds until the archive the first use started making is in place."""
    import glob

    folder = os.path.join(env["SPARKRECOVER_CACHE"], "class-archives")
    started = time.monotonic()
    while time.monotonic() - started < 1800:
        if glob.glob(os.path.join(folder, "*.jsa.json")):
            return time.monotonic() - started
        if glob.glob(os.path.join(folder, "*.failed")):
            sys.exit(f"no archive could be made: {open(glob.glob(os.path.join(folder, '*.failed'))[0]).read()}")
        time.sleep(1)
    sys.exit("no archive after 30 minutes")


if __name__ == "__main__":
    main()
