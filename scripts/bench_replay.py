"""Replayed actions (docs/replay.md; the goals of docs/design.md §9), two benchmarks:

    .venv/bin/python scripts/bench_replay.py [--pairs 3] [--at 0.7] [--rows 100000] [--write-seconds 1]
        [--repeat 1] [--only-resume] [--keep]

1. **Resume cost.** tests/apps/replayed_past.py (a cached CSV read with inferSchema, a printed
   count, two shows, a sampled count naming a folder, three collects, a small write, then a big
   write of 16 partitions of about 1 s each) under ``sparkrecover submit``, uninterrupted (the full
   run), then killed once ``--at`` of the big write's partitions committed and resumed. Prints the
   Spark jobs the resumed application ran before the big write's first job (goal: 0, from its
   journal's ``spark.job.started``), and the resume's wall time against one driver start (a
   trivial app under submit) plus the unfinished work (the full run's write time, in the share of
   partitions the resume computed): goal at most 1.15x. ``--write-seconds`` is what each task of the
   big write sleeps (default 1): the resume's fixed costs (a new application's first query, its
   Python workers, a cache its write fills) stay the same while the unfinished work grows with it.
   The resume's phases come from its journal, the write's jobs before its first task from Spark's
   job events (``time_ms``): the cache the write's query fills and its shuffle's map stage. Last,
   what the resume had left, run as a plain application of its own (scripts/bench_apps/
   leftover_write.py: the write's query computing only the partitions the resume computed, the
   others empty tasks): the resume against it says what replaying the past costs beyond the work
   any application doing what is left pays, fixed costs included; and the goal once more with the
   unfinished work measured whole, as that application's time beyond one driver start
   (docs/decisions/0065-unfinished-work-measured-whole.md).
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
from tests.e2e.support import REPLAYED_PAST, seed_orders

PAST = REPLAYED_PAST
START = os.path.join(_bench.APPS, "start.py")  # a trivial application: one driver start
COLLECT = os.path.join(_bench.APPS, "collect_rows.py")
LEFTOVER = os.path.join(_bench.APPS, "leftover_write.py")
WRITE = 16


def seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def big_write(journal: list[dict]) -> str:
    return next(r["stage"] for r in journal if r["type"] == "write.started" and r["partitions"] == WRITE)


def submit(work: str, run_id: str, log: str, *extra: str) -> list[str]:
    return _bench.sparkrecover(
        "submit", "--root", os.path.join(work, "root"), "--run-id", run_id, "--", *_bench.SPARK_OPTIONS, *extra
    )


def resume_cost(work: str, at: float, log: str, write_seconds: float) -> None:
    seed_orders(work)
    args = [os.path.join(work, "orders"), os.path.join(work, "out")]
    env = {**os.environ, "WRITE_SLEEP": f"{write_seconds:g}"}
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
        set(r.get("kept") or [])
        for r in journal
        if r["type"] == "write.started" and r["attempt"] == last and r["stage"] == stage
    )
    computed = WRITE - len(kept)
    bar = start + 1.15 * write_s * computed / WRITE
    replayed = sum(1 for r in journal if r["type"] == "action.replayed" and r["attempt"] == last)
    print(f"resume cost: full run {full:.1f}s (its big write {write_s:.1f}s), driver start {start:.1f}s")
    print(
        f"  killed at {at:.0%}: resume {resumed:.1f}s, {computed}/{WRITE} write partitions computed, "
        f"{replayed} actions replayed, {before} Spark jobs before the write's first "
        f"(goal 0: {'met' if before == 0 else 'MISSED'})"
    )
    print(f"  the resume's phases (journal): {phases(journal, last, stage)}")
    waves = -(-computed // 2) * write_seconds  # local[2]: the tasks' own sleep, two at a time
    print(
        f"  of the bar's {1.15 * write_s * computed / WRITE:.2f}s for unfinished work, the computed partitions' "
        f"sleep alone takes {waves:.2f}s on two slots"
    )
    print(
        f"  resume / (driver start + 1.15 x unfinished work) = {resumed:.1f} / {bar:.1f} = "
        f"{resumed / bar:.3f} (goal <= 1.0: {_bench.verdict(resumed / bar, 1.0)}); "
        f"resume / full run = {resumed / full:.3f}"
    )
    # What is left, as a plain application: the same query's write computing only those partitions.
    left = ",".join(str(p) for p in range(WRITE) if p not in kept)
    leftover = _bench.timed(
        [*submit(work, "leftover", log), LEFTOVER, args[0], os.path.join(work, "leftover-out"), left], log, env
    )
    # The unfinished work measured whole: what that application spends beyond one driver start
    # (its first query, its Python workers, the input its write reads), not a share of the full
    # run's write, which had those costs behind it already.
    whole = start + 1.15 * max(leftover - start, 0.0)
    print(
        f"  what is left as an application of its own (the write's query, only partitions {left} computed, "
        f"under submit): {leftover:.1f}s; resume / it = {resumed / leftover:.3f}; resume / (driver start + "
        f"1.15 x (it - driver start)) = {resumed:.1f} / {whole:.1f} = {resumed / whole:.3f} "
        f"(<= 1.0: {_bench.verdict(resumed / whole, 1.0)})"
    )


def phases(journal: list[dict], attempt: int, stage: str) -> str:
    """Where an attempt's time went: to its driver, through the script to the write, the write,
    and from the write's commit to the attempt's end."""
    mine = [r for r in journal if r["attempt"] == attempt]

    def when(kind: str, of: str | None = None) -> float:
        return next(seconds(r["ts"]) for r in mine if r["type"] == kind and (of is None or r.get("stage") == of))

    # The write's own jobs before its stage starts: the probe that sizes its partitions (the cache
    # its query fills, its shuffle's map stage), timed by Spark's job events.
    jobs = [r for r in mine if r["type"] in ("spark.job.started", "spark.job.ended") and r.get("stage") == stage]
    started = {r["job"]: r["time_ms"] for r in jobs if r["type"] == "spark.job.started"}
    began = when("stage.started", stage)
    probe_s = sum(
        (r["time_ms"] - started[r["job"]]) / 1000
        for r in jobs
        if r["type"] == "spark.job.ended" and r["job"] in started and r["time_ms"] / 1000 <= began
    )
    marks = [
        ("driver start", when("attempt.started"), when("driver.started")),
        ("script to the write", when("driver.started"), when("stage.started", stage)),
        ("(of it the write's probe jobs", 0.0, probe_s),
        ("the write", when("stage.started", stage), when("stage.committed", stage)),
        ("to the end", when("stage.committed", stage), when("attempt.ended")),
    ]
    return ", ".join(f"{name} {end - begin:.1f}s" + (")" if name.startswith("(") else "") for name, begin, end in marks)


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
    parser.add_argument("--repeat", type=int, default=1, help="resume-cost runs, one after the other")
    parser.add_argument("--write-seconds", type=float, default=1.0, help="what each big-write task sleeps")
    parser.add_argument("--only-resume", action="store_true", help="skip the recording-cost pairs")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (its path is printed)")
    options = parser.parse_args()
    _bench.warm_jar()
    work = tempfile.mkdtemp(prefix="bench-replay-")
    log = os.path.join(work, "bench.log")
    try:
        for one in range(options.repeat):  # single runs move by 10-30 % here: repeat, then compare
            folder = os.path.join(work, f"resume-{one}")
            os.makedirs(folder)
            resume_cost(folder, options.at, log, options.write_seconds)
        if not options.only_resume:
            recording_cost(work, options.rows, options.pairs, log)
        print(_bench.load_note())
    finally:
        if options.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
