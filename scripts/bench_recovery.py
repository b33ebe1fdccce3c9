"""Recovery time (docs/design.md §9): a 4-stage pipeline killed during stage 4, then resumed.

    .venv/bin/python scripts/bench_recovery.py [--rows 6000000] [--rounds 4]

1. The pipeline (bench_apps/pipeline.py, four similar stages) under plain spark-submit, start to
   end: what a plain re-submission after a crash costs, and each stage's time in a warm JVM.
2. Stage 4 alone plus one driver start, measured as what it is: plain spark-submit of the
   pipeline running only stage 4 from step 1's stage-3 checkpoint. This is the bar: the least
   any recovery of stage 4 can cost (a new driver, stage 4, its first jobs in a cold JVM).
3. One driver start by itself: plain spark-submit of bench_apps/start.py (median of 3).
4. The pipeline under ``sparkrecover submit``, its whole process group SIGKILLed half-way through
   stage 4 (by step 1's stage-4 time); then ``sparkrecover resume``, timed from launch to exit.

Prints resume / (stage 4 alone + one driver start) (goal <= 1.15), the stricter resume / (warm
stage-4 time of step 1 + step 3's driver start), and plain re-submission over the bar.
Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import _bench

GOAL = 1.15


def wait_for_stage_start(run_dir: str, stage: str, child: subprocess.Popen, timeout: float = 900) -> None:
    from sparkrecover.journal.reader import read_journal

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            sys.exit(f"the run ended (exit {child.returncode}) before stage {stage} started")
        try:
            if any(r["type"] == "stage.started" and r.get("stage") == stage for r in read_journal(run_dir)):
                return
        except Exception:
            pass
        time.sleep(0.05)
    sys.exit(f"stage {stage} did not start within {timeout} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    options = parser.parse_args()
    _bench.warm_jar()
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-recovery-")
    log, root = os.path.join(work, "runs.log"), os.path.join(work, "root")
    pipeline = os.path.join(_bench.APPS, "pipeline.py")
    app_args = ["--rows", str(options.rows), "--rounds", str(options.rounds)]
    submit = _bench.spark_submit()
    print(
        f"bench_recovery: 4 stages of {options.rows} rows x {options.rounds} hashes on local[2] "
        f"{_bench.load_note()}; logs in {log}",
        flush=True,
    )

    timings = os.path.join(work, "plain-timings.json")
    plain = _bench.timed(
        [submit, *_bench.SPARK_OPTIONS, pipeline, os.path.join(work, "plain"), *app_args, "--timings", timings],
        log,
        _bench.plain_env(),
    )
    with open(timings) as handle:
        stages = json.load(handle)
    stage4 = stages["s4"]
    print(f"  plain run: {plain:.2f} s; stages {', '.join(f'{k} {v:.2f} s' for k, v in stages.items())}", flush=True)

    alone_timings = os.path.join(work, "alone-timings.json")
    alone = _bench.timed(
        [
            submit,
            *_bench.SPARK_OPTIONS,
            pipeline,
            os.path.join(work, "alone"),
            *app_args,
            "--alone",
            "4",
            "--input",
            os.path.join(work, "plain"),
            "--timings",
            alone_timings,
        ],
        log,
        _bench.plain_env(),
    )
    with open(alone_timings) as handle:
        alone_stage4 = json.load(handle)["s4"]
    print(
        f"  stage 4 alone + one driver start (plain spark-submit): {alone:.2f} s "
        f"(stage 4 in a cold JVM: {alone_stage4:.2f} s)",
        flush=True,
    )

    starts = [
        _bench.timed([submit, *_bench.SPARK_OPTIONS, os.path.join(_bench.APPS, "start.py")], log, _bench.plain_env())
        for _ in range(3)
    ]
    driver_start = _bench.median(starts)
    print(f"  one driver start by itself (median of 3): {driver_start:.2f} s", flush=True)

    run_dir = os.path.join(root, "recovery")
    command = _bench.sparkrecover(
        "submit",
        "--root",
        root,
        "--run-id",
        "recovery",
        "--spark-submit",
        submit,
        "--",
        *_bench.SPARK_OPTIONS,
        pipeline,
        os.path.join(work, "recovered"),
        *app_args,
    )
    with open(log, "ab") as handle:
        child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_stage_start(run_dir, "s4", child)
        time.sleep(stage4 / 2)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    print(f"  submitted under sparkrecover, killed {stage4 / 2:.1f} s into stage s4", flush=True)

    resume = _bench.timed(_bench.sparkrecover("resume", "recovery", "--root", root), log)
    from sparkrecover.journal import read_journal

    second = [r for r in read_journal(run_dir) if r["attempt"] == 2]
    skipped = [r["stage"] for r in second if r["type"] == "stage.skipped"]
    committed = {r["stage"]: r["duration_s"] for r in second if r["type"] == "stage.committed"}
    print(
        f"  resume: {resume:.2f} s (skipped {', '.join(skipped)}; ran "
        f"{', '.join(f'{k} in {v:.2f} s' for k, v in committed.items())})"
    )

    ratio = resume / alone
    print(
        f"resume / (stage 4 alone + one driver start) = {resume:.2f} / {alone:.2f} = {ratio:.3f} "
        f"(goal <= {GOAL}): {_bench.verdict(ratio, GOAL)}"
    )
    strict = stage4 + driver_start
    print(
        f"stricter: resume / (warm stage-4 time + driver start) = {resume:.2f} / ({stage4:.2f} + "
        f"{driver_start:.2f}) = {resume / strict:.3f}"
    )
    print(f"plain re-submission / (stage 4 alone + one driver start) = {plain:.2f} / {alone:.2f} = {plain / alone:.3f}")
    for data in ("plain", "alone", "recovered", "root"):  # gigabytes of checkpoints; the log stays
        shutil.rmtree(os.path.join(work, data), ignore_errors=True)
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
