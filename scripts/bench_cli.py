"""CLI start (docs/design.md §9): ``sparkrecover --help`` in a new process, and what it imports.

    .venv/bin/python scripts/bench_cli.py [--runs 10]

Times --runs fresh processes of ``sparkrecover --help`` (the console script when installed, else
``python -m sparkrecover``) and reports the median (goal <= 0.25 s). Then lists which heavy
modules (pyspark, py4j, fsspec, s3fs, rich, the journal, the planner) a ``--help`` and a
``submit --help`` import: each should be imported only by the command that needs it.
Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

import _bench

GOAL_SECONDS = 0.25
HEAVY = (
    "pyspark",
    "py4j",
    "fsspec",
    "s3fs",
    "botocore",
    "rich",
    "pydantic",
    "orjson",
    "sparkrecover.journal",
    "sparkrecover.core.verdicts.planner",
    "sparkrecover.driver.api",
)
PROBE = f"""
import sys
from sparkrecover.cli import app as cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(name for name in {HEAVY!r} if name in sys.modules) or "none of them", file=sys.stderr)
"""


def command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "sparkrecover")
    if os.access(script, os.X_OK):
        return [script]
    found = shutil.which("sparkrecover")
    return [found] if found else [sys.executable, "-m", "sparkrecover"]


def imported(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True)
    return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    help_command = [*command(), "--help"]
    print(f"bench_cli: {' '.join(help_command)}, {options.runs} runs {_bench.load_note()}", flush=True)
    subprocess.run(help_command, capture_output=True, check=True)  # warm the page cache once
    times = []
    for _ in range(options.runs):
        started = time.perf_counter()
        subprocess.run(help_command, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    median = _bench.median(times)
    print(f"  runs: {', '.join(f'{t:.3f}' for t in times)}")
    print(f"  imported by --help: {imported('--help')}")
    print(f"  imported by submit --help: {imported('submit', '--help')}")
    print(
        f"sparkrecover --help: {median:.3f} s median (goal <= {GOAL_SECONDS} s): {_bench.verdict(median, GOAL_SECONDS)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
