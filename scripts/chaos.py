"""Chaos: kill a real multi-stage pipeline at random moments and resume it until it finishes.

    .venv/bin/python scripts/chaos.py [--trials N] [--seed S] [--rows R]

Each trial submits the demo pipeline (four stages), SIGKILLs the whole process group at a
random moment (seeded), then resumes — each resume may itself be killed at a random moment, up
to a few times — until an attempt succeeds. The final report must be identical to the one of an
uninterrupted run under plain spark-submit. Prints `identical: N/N` and exits 0 (1 if any differ).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
PIPELINE = os.path.join(ROOT, "sparkrecover", "demo", "pipeline.py")
QUIET = [
    "--driver-java-options",
    f"-Dlog4j2.configurationFile={os.path.join(ROOT, 'sparkrecover', 'demo', 'log4j2.properties')}",
]
SPARK = ["--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4", *QUIET]
SPARKRECOVER = [sys.executable, "-m", "sparkrecover"]


# The driver and workers run on this Python (which has sparkrecover), as `submit` arranges too.
ENV = {**os.environ, "PYSPARK_PYTHON": sys.executable}


def run_maybe_killed(command: list[str], kill_after: float | None, log) -> tuple[int | None, float]:
    """Run a command in its own process group; SIGKILL the group after kill_after seconds.
    Returns (exit code or None when killed, seconds)."""
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True, env=ENV)
    try:
        child.wait(timeout=kill_after)
        return child.returncode, time.monotonic() - started
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        return None, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--max-resumes", type=int, default=5)
    options = parser.parse_args()
    rng = random.Random(options.seed)
    from sparkrecover.launch.launcher import find_spark_submit

    work = tempfile.mkdtemp(prefix="sparkrecover-chaos-")
    log = open(os.path.join(work, "chaos.log"), "ab")
    reference = os.path.join(work, "reference")
    code, full = run_maybe_killed(
        [find_spark_submit(), *SPARK, PIPELINE, reference, "--rows", str(options.rows)], None, log
    )
    if code != 0:
        print(f"the uninterrupted reference run failed (exit {code}); see {work}/chaos.log", file=sys.stderr)
        return 1
    expected = open(os.path.join(reference, "report.txt")).read()
    print(f"reference run: {full:.1f}s; trials kill at uniform moments in [0, {full:.1f}s)")
    identical = 0
    for trial in range(1, options.trials + 1):
        root, out = os.path.join(work, f"root-{trial}"), os.path.join(work, f"out-{trial}")
        run_id = f"chaos-{trial}"
        kills, attempts = 0, 1
        code, _ = run_maybe_killed(
            [
                *SPARKRECOVER,
                "submit",
                "--root",
                root,
                "--run-id",
                run_id,
                "--",
                *SPARK,
                PIPELINE,
                out,
                "--rows",
                str(options.rows),
            ],
            rng.uniform(0, full),
            log,
        )
        kills += code is None
        while code != 0 and attempts <= options.max_resumes:
            kill_after = rng.uniform(0, full) if rng.random() < 0.3 else None
            attempts += 1
            code, _ = run_maybe_killed([*SPARKRECOVER, "resume", run_id, "--root", root], kill_after, log)
            kills += code is None
            if code == 5:  # killed before the journal had a record of the run: start it again
                code, _ = run_maybe_killed(
                    [
                        *SPARKRECOVER,
                        "submit",
                        "--root",
                        root,
                        "--run-id",
                        run_id,
                        "--",
                        *SPARK,
                        PIPELINE,
                        out,
                        "--rows",
                        str(options.rows),
                    ],
                    None,
                    log,
                )
        report = os.path.join(out, "report.txt")
        same = code == 0 and os.path.exists(report) and open(report).read() == expected
        identical += same
        print(
            f"trial {trial}: {kills} kill(s), {attempts} launch(es), exit {code}, "
            f"{'identical' if same else 'DIFFERENT'}",
            flush=True,
        )
    print(f"identical: {identical}/{options.trials}")
    print(f"work folder: {work}")
    return 0 if identical == options.trials else 1


if __name__ == "__main__":
    sys.exit(main())
