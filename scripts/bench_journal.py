"""Journal writer throughput with bounded memory, on local disk and on an S3 API (docs/design.md §9).

    .venv/bin/python scripts/bench_journal.py [--events N] [--s3-events N] [--no-s3]

Appends N typical events (the size of a spark.stage.completed record) through JournalWriter with
the default buffer (1 MiB) and flush interval (1 s), closes it, and prints events per second with
the ratio to the goal of 300,000/s, and the peak Python heap (tracemalloc), which stays flat
however many events go through (it is the buffers plus, on S3, the current segment object).

Two entry points are measured: ``append(type, payload)``, which the listener bridge calls for
every Spark event (the stream that carries the volume; each payload is a fresh dict, as the
bridge's parsed listener lines are), and ``emit(type, **payload)``, which pipeline events
(a few per stage) go through and which also builds and returns the record. The S3 figure uses a
moto server on 127.0.0.1 in its own process, started here: it measures the writer against a
local S3 API, not AWS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sparkrecover import storage
from sparkrecover.journal import (
    JournalWriter,
    events,
)
from sparkrecover.journal.segments import list_segments
from sparkrecover.rundir.runs import Run

GOAL = 300_000
ENTRIES = ("append", "emit")
PAYLOAD = {
    "stage": "daily",
    "spark_stage": 12,
    "spark_attempt": 0,
    "name": "parquet at etl.py:42",
    "tasks": 200,
    "failed_tasks": 0,
    "failure": None,
    "metrics": {"executor_run_ms": 52_311, "input_bytes": 1_048_576, "shuffle_write_bytes": 262_144},
}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def feed(writer: JournalWriter, entry: str, count: int) -> None:
    kind = events.SPARK_STAGE_COMPLETED
    if entry == "append":
        append, payload = writer.append, PAYLOAD
        for _ in range(count):
            append(kind, payload.copy())
    else:
        emit = writer.emit
        for _ in range(count):
            emit(kind, **PAYLOAD)


def measure(run_dir: str, count: int, entry: str) -> dict:
    """Append ``count`` events, close, and return the figures: speed and peak RSS on a first pass,
    the Python heap on a second under tracemalloc (which slows allocation and inflates RSS)."""
    writer = JournalWriter(Run("bench", run_dir), 1, events.WRITER_DRIVER)
    started = time.perf_counter()
    feed(writer, entry, count)
    appended = time.perf_counter() - started
    writer.close()
    total = time.perf_counter() - started
    rss = peak_rss_mib()
    check_lines(run_dir, count)

    tracemalloc.start()
    writer = JournalWriter(Run("bench", run_dir + "-mem"), 1, events.WRITER_DRIVER)
    feed(writer, entry, min(count, 200_000))
    writer.close()
    _, peak_heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "events": count,
        "rate": count / appended,
        "rate_with_close": count / total,
        "peak_heap_mib": peak_heap / (1 << 20),
        "peak_rss_mib": rss,
        "segments": len(list_segments(run_dir)),
    }


def check_lines(run_dir: str, count: int) -> None:
    # Counted, not parsed: a million parsed records would dwarf the writer's own memory.
    lines = sum(storage.read_bytes(s.url).count(b"\n") for s in list_segments(run_dir))
    if lines != count:
        raise SystemExit(f"bench: {lines:,} lines in the journal for {count:,} events")


def measure_apart(run_dir: str, count: int, entry: str) -> dict:
    """measure() in a new Python process, so each figure's peak RSS is its own."""
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--measure", run_dir, entry, str(count)],
        stdout=subprocess.PIPE,
        check=True,
    )
    return json.loads(child.stdout)


def report(label: str, figures: dict) -> None:
    print(
        f"{label}: {figures['events']:,} events appended at {figures['rate']:,.0f}/s "
        f"({figures['rate'] / GOAL:.2f} x the goal of {GOAL:,}/s); "
        f"{figures['rate_with_close']:,.0f}/s including the final flush and close"
    )
    print(
        f"{' ' * len(label)}  peak Python heap {figures['peak_heap_mib']:.1f} MiB while appending "
        f"{min(figures['events'], 200_000):,} events, process peak RSS {figures['peak_rss_mib']:.0f} MiB, "
        f"{figures['segments']} segment(s) after close",
        flush=True,
    )


def bench_local(count: int) -> None:
    folder = tempfile.mkdtemp(prefix="sparkrecover-bench-")
    try:
        for entry in ENTRIES:
            report(f"local disk, {entry}", measure_apart(os.path.join(folder, entry), count, entry))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bench_s3(count: int) -> None:
    """Against a moto server in its own process, so its copies of the objects do not count
    towards the writer's memory."""
    import urllib.request

    try:
        import boto3
        import moto.server  # noqa: F401
    except ImportError:
        print("s3 (moto): skipped: install the test extras (moto[server], s3fs)")
        return
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):  # up to 10 s for the server to answer
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="sparkrecover-bench")
        for entry in ENTRIES:
            report(f"s3 (moto), {entry}", measure_apart(f"s3://sparkrecover-bench/{entry}", count, entry))
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events for the local disk run")
    parser.add_argument("--s3-events", type=int, default=300_000, help="events for the S3 run")
    parser.add_argument("--no-s3", action="store_true", help="skip the S3 run")
    parser.add_argument("--measure", nargs=3, metavar=("RUN_DIR", "ENTRY", "EVENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the child process of measure_apart
        run_dir, entry, count = args.measure
        print(json.dumps(measure(run_dir, int(count), entry)))
        return 0
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other work on the machine lowers the rates)")
    bench_local(args.events)
    if not args.no_s3:
        bench_s3(args.s3_events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
