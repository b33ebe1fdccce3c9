"""Planning time (docs/design.md §9): ``resume --dry-run`` over a journal of a million events.

    .venv/bin/python scripts/bench_planner.py [--events 1000000] [--stages 100] [--files 10000] [--dir DIR]

Writes, with the real journal writer, the journal of a run that crashed in its last pipeline
stage: --stages stages, each with the Spark telemetry of the JVM listener (job started, stage
summary, job ended) up to --events events in all; the first stage's output is --files real files
on local disk (its manifest goes to manifests/, as for any output of over 1,000 files), every
other stage's one file. Then times ``sparkrecover resume RUN --dry-run --json`` in a new process
(median of 3; goal <= 3 s) and reports its peak memory, and the same with the human table once.
``--dir`` keeps the synthetic run there and reuses it on the next call. Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import _bench
import orjson

from sparkrecover.rundir.runs import Run

GOAL_SECONDS = 3.0
RUN = "planner-bench"


def stage_summary(name: str, spark_stage: int) -> dict:
    """What the JVM listener writes for one Spark stage (driver/process/telemetry.py turns it into this event)."""
    return {
        "spark_stage": spark_stage,
        "spark_attempt": 0,
        "stage": name,
        "name": "save at NativeMethodAccessorImpl.java:0",
        "tasks": 8,
        "completed_tasks": 8,
        "failed_tasks": 0,
        "killed_tasks": 0,
        "failure": None,
        "metrics": {
            "duration_ms": 812,
            "executor_run_time_ms": 1480,
            "executor_cpu_time_ms": 1210,
            "jvm_gc_time_ms": 31,
            "longest_task_ms": 240,
            "input_bytes": 1048576,
            "output_bytes": 524288,
            "output_records": 10000,
            "shuffle_read_bytes": 0,
            "shuffle_write_bytes": 65536,
            "disk_spilled_bytes": 0,
            "peak_execution_memory_bytes": 16777216,
        },
    }


def make_run(root: str, events: int, stages: int, files: int) -> int:
    from sparkrecover.journal import JournalWriter
    from sparkrecover.rundir import manifests

    run_dir = os.path.join(root, RUN)
    cli = JournalWriter(Run(RUN, run_dir), 1, "cli", flush_interval=0)
    cli.emit(
        "run.started",
        app=os.path.join(root, "etl.py"),
        app_args=["--day", "2026-11-21"],
        spark_submit_args=["--master", "local[2]"],
        spark_submit="spark-submit",
        cwd=root,
        user="bench",
        host="localhost",
        versions={"sparkrecover": "bench"},
    )
    cli.emit("attempt.started", pid=1, command=["spark-submit", "bootstrap.py"])
    cli.close()
    driver = JournalWriter(Run(RUN, run_dir), 1, "driver", flush_interval=0)
    driver.emit(
        "driver.started",
        app_id="local-1",
        master="local[2]",
        deploy_mode="client",
        spark_version="4.3.0",
        pid=2,
        listener="jvm",
    )
    written, job, per_stage = 2 + 1, 0, max(1, (events - 3) // stages)
    for number in range(stages):
        name = f"stage-{number:04d}"
        output = os.path.join(root, "outputs", name)
        os.makedirs(output, exist_ok=True)
        for index in range(files if number == 0 else 1):
            with open(os.path.join(output, f"part-{index:05d}.parquet"), "wb") as handle:
                handle.write(b"PAR1" * (index % 7 + 1))
        driver.emit(
            "stage.started",
            stage=name,
            kind="checkpoint",
            outputs=[output],
            upstream=[f"stage-{number - 1:04d}"] if number else [],
            fingerprint={"version": None},
        )
        written += 1
        last = number == stages - 1
        # Each stage: started, Spark jobs (3 events each), committed; the last takes the rest.
        for _ in range((events - written if last else per_stage - 2) // 3):
            driver.emit("spark.job.started", job=job, stage=name, time_ms=1795316611233 + job)
            driver.emit("spark.stage.completed", **stage_summary(name, job))
            driver.emit("spark.job.ended", job=job, stage=name, succeeded=True, time_ms=1795316612233 + job)
            job, written = job + 1, written + 3
        if not last:  # the last stage is the one the crash interrupted
            manifest, ref, digest = manifests.externalize(
                name, [manifests.build_output(output, "file://" + output)], run_dir
            )
            driver.emit(
                "stage.committed",
                stage=name,
                manifest=manifest,
                manifest_ref=ref,
                manifest_sha256=digest,
                format="parquet",
                duration_s=12.5,
                spark_jobs=[job - 1],
                upstream=[],
            )
            written += 1
    driver.close()
    return written


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--stages", type=int, default=100)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--dir", help="keep the synthetic run here (and reuse it)")
    options = parser.parse_args()
    root = os.path.abspath(options.dir) if options.dir else tempfile.mkdtemp(prefix="sparkrecover-bench-planner-")
    journal = os.path.join(root, RUN, "journal")
    if not os.path.isdir(journal):
        started = time.perf_counter()
        count = make_run(root, options.events, options.stages, options.files)
        print(f"wrote {count} events in {time.perf_counter() - started:.1f} s", flush=True)
    size = sum(os.path.getsize(os.path.join(journal, name)) for name in os.listdir(journal))
    print(
        f"bench_planner: journal of {options.events} events ({size / 1e6:.0f} MB) and {options.stages} stages, "
        f"one output of {options.files} files, in {root} {_bench.load_note()}",
        flush=True,
    )

    command = _bench.sparkrecover("resume", RUN, "--root", root, "--dry-run")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        done = subprocess.run([*command, "--json"], capture_output=True)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            sys.exit(f"resume --dry-run failed: {done.stderr.decode()[-2000:]}")
    plan = orjson.loads(done.stdout)
    decisions = [stage["decision"] for stage in plan["stages"]]
    expected = ["skip"] * (options.stages - 1) + ["run"]
    print(
        f"  resume --dry-run --json: {', '.join(f'{t:.2f} s' for t in times)}; decisions as expected: "
        f"{decisions == expected}"
    )
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True)
    print(f"  resume --dry-run (table): {time.perf_counter() - started:.2f} s")
    median = _bench.median(times)
    print(
        f"resume --dry-run wall time: {median:.2f} s median (goal <= {GOAL_SECONDS:.0f} s): "
        f"{_bench.verdict(median, GOAL_SECONDS)}; peak memory {peak_rss_mb():.0f} MB"
    )
    if not options.dir:
        shutil.rmtree(root, ignore_errors=True)  # a 340 MB journal and 10,000 files
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
