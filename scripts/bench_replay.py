"""Replayed actions (docs/replay.md; the goals of docs/design.md §9), two benchmarks:

    .venv/bin/python scripts/bench_replay.py [--pairs 3] [--at 0.7] [--rows 100000]

1. **Resume cost.** tests/apps/replayed_past.py (a cached CSV read with inferSchema, a printed
   count, two shows, a sampled count naming a folder, three collects, a small write, then a big
   write of 16 partitions of about 1 s each) under ``sparkrecover submit``, uninterrupted (the full
   run), then killed once ``--at`` of the big write's partitions committed and resumed. Prints the
   Spark jobs the resumed application ran before the big write's first job (goal: 0, from its
   journal's ``spark.job.started``), and the resume's wall time against one driver start (a
   trivial app under submit) plus the unfinished work (the full run's write time, in the share of
   partitions the resume computed): goal at most 1.15x.
2. **Recording cost.** scripts/bench_apps/collect_rows.py collecting ``--rows`` rows, under
   submit with recording on and with ``spark.sparkrecover.replay=false``, alternating pairs:
   median wall ratio, goal at most 1.01; and the same with a limit the result is over
   (``spark.sparkrecover.results.maxBytes=64k``): it should add nothing.

Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime

import _bench

from sparkrecover.journal import read_journal

PAST = os.path.join(_bench.REPO, "tests", "apps", "replayed_past.py")
START = os.path.join(_bench.APPS, "start.py")  # a trivial application: one driver start
COLLECT = os.path.join(_bench.APPS, "collect_rows.py")
WRITE = 16


def seed(folder: str) -> None:
    import random

    draw = random.Random(37)
    os.makedirs(os.path.join(folder, "orders"))
    for part in range(2):
        with open(os.path.join(folder, "orders", f"part-{part}.csv"), "w") as handle:
            handle.write("order_id,country,day,amount\n")
            for order in range(part * 3000, (part + 1) * 3000):
                day = f"2026-{1 + order % 3:02d}-{1 + draw.randrange(28):02d}"
                handle.write(f"{order},{'FR DE NL ES'.split()[draw.randrange(4)]},{day},{draw.uniform(1, 500):.2f}\n")


def seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def big_write(journal: list[dict]) -> str:
    return next(r["stage"] for r in journal if r["type"] == "write.started" and r["partitions"] == WRITE)


def submit(work: str, run_id: str, log: str, *extra: str) -> list[str]:
    return _bench.sparkrecover(
        "submit", "--root", os.path.join(work, "root"), "--run-id", run_id, "--", *_bench.SPARK_OPTIONS, *extra
    )


def resume_cost(work: str, at: float, log: str) -> None:
    seed(work)
    args = [os.path.join(work, "orders"), os.path.join(work, "out")]
    env = {**os.environ, "WRITE_SLEEP": "1"}
    start = _bench.timed([*submit(work, "start", log), START], log)
    full = _bench.timed([*submit(work, "full", log), PAST, *args], log, env)
    journal = read_journal(os.path.join(work, "root", "full"))
    stage = big_write(journal)
    began = next(seconds(r["ts"]) for r in journal if r["type"] == "stage.started" and r["stage"] == stage)
    ended = next(seconds(r["ts"]) for r in journal if r["type"] == "stage.committed" and r["stage"] == stage)
    write_s = ended - began
    shutil.rmtree(os.path.join(work, "out"))
    run_dir = os.path.join(work, "root", "cut")
    with open(log, "ab") as handle:
        process = subprocess.Popen(
            [*submit(work, "cut", log), PAST, *args], stdout=handle, stderr=handle, env=env, start_new_session=True
        )
    while True:
        try:
            journal = read_journal(run_dir)
        except Exception:
            journal = []
        writes = {r["stage"] for r in journal if r["type"] == "write.started" and r["partitions"] == WRITE}
        done = {r["partition"] for r in journal if r["type"] == "task.committed" and r["stage"] in writes}
        if len(done) >= at * WRITE:
            break
        if process.poll() is not None:
            raise SystemExit(f"the run ended before {at:.0%} of its write; see {log}")
        time.sleep(0.05)
    os.killpg(process.pid, 9)
    process.wait()
    resumed = _bench.timed(_bench.sparkrecover("resume", "cut", "--root", os.path.join(work, "root")), log, env)
    journal = read_journal(run_dir)
    last = max(r["attempt"] for r in journal)
    stage = big_write(journal)
    jobs = [r for r in journal if r["type"] == "spark.job.started" and r["attempt"] == last]
    before = 0
    for job in jobs:
        if job.get("stage") == stage:
            break
        before += 1
    kept = next(
        len(r.get("kept") or [])
        for r in journal
        if r["type"] == "write.started" and r["attempt"] == last and r["stage"] == stage
    )
    computed = WRITE - kept
    bar = start + 1.15 * write_s * computed / WRITE
    replayed = sum(1 for r in journal if r["type"] == "action.replayed" and r["attempt"] == last)
    print(f"resume cost: full run {full:.1f}s (its big write {write_s:.1f}s), driver start {start:.1f}s")
    print(
        f"  killed at {at:.0%}: resume {resumed:.1f}s, {computed}/{WRITE} write partitions computed, "
        f"{replayed} actions replayed, {before} Spark jobs before the write's first "
        f"(goal 0: {'met' if before == 0 else 'MISSED'})"
    )
    print(f"  the resume's phases (journal): {phases(journal, last, stage)}")
    print(
        f"  resume / (driver start + 1.15 x unfinished work) = {resumed:.1f} / {bar:.1f} = "
        f"{resumed / bar:.3f} (goal <= 1.0: {_bench.verdict(resumed / bar, 1.0)}); "
        f"resume / full run = {resumed / full:.3f}"
    )


def phases(journal: list[dict], attempt: int, stage: str) -> str:
    """Where an attempt's time went: to its driver, through the script to the write, the write,
    and from the write's commit to the attempt's end."""
    mine = [r for r in journal if r["attempt"] == attempt]

    def when(kind: str, of: str | None = None) -> float:
        return next(seconds(r["ts"]) for r in mine if r["type"] == kind and (of is None or r.get("stage") == of))

    marks = [
        ("driver start", when("attempt.started"), when("driver.started")),
        ("script to the write", when("driver.started"), when("stage.started", stage)),
        ("the write", when("stage.started", stage), when("stage.committed", stage)),
        ("to the end", when("stage.committed", stage), when("attempt.ended")),
    ]
    return ", ".join(f"{name} {end - begin:.1f}s" for name, begin, end in marks)


def recording_cost(work: str, rows: int, pairs: int, log: str) -> None:
    off = ["--conf", "spark.sparkrecover.replay=false"]
    over = ["--conf", "spark.sparkrecover.results.maxBytes=64k"]
    times: dict[str, list[float]] = {"on": [], "off": [], "over": []}
    for pair in range(pairs):
        for name, extra in (("on", []), ("off", off), ("over", over)):
            run_id = f"collect-{name}-{pair}"
            times[name].append(_bench.timed([*submit(work, run_id, log, *extra), COLLECT, str(rows)], log))
    on, off_, over_ = (_bench.median(times[k]) for k in ("on", "off", "over"))
    print(
        f"recording cost: a clean run collecting {rows:,} rows, median of {pairs}: "
        f"recorded {on:.2f}s, not recorded {off_:.2f}s: {on / off_:.3f}x "
        f"(goal <= 1.01: {_bench.verdict(on / off_, 1.01)})"
    )
    print(f"  over the limit (64k): {over_:.2f}s: {over_ / off_:.3f}x of not recording (goal: adds nothing)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--at", type=float, default=0.7)
    parser.add_argument("--rows", type=int, default=100_000)
    options = parser.parse_args()
    _bench.warm_jar()
    work = tempfile.mkdtemp(prefix="bench-replay-")
    log = os.path.join(work, "bench.log")
    try:
        resume_cost(work, options.at, log)
        recording_cost(work, options.rows, options.pairs, log)
        print(_bench.load_note())
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
