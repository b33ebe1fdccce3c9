"""The sparkrecover demo: a four-stage pipeline killed mid-way with SIGKILL, then resumed.

Run through ``bash scripts/demo.sh`` (which sets up .venv). Uses the embedded default: local
Spark and the journal in ./.sparkrecover. Spark's own logs go to ./demo-output/<run>/spark.log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(os.path.dirname(HERE), "sparkrecover", "demo")
PIPELINE = os.path.join(DEMO, "pipeline.py")
QUIET_SPARK = ["--driver-java-options", f"-Dlog4j2.configurationFile={os.path.join(DEMO, 'log4j2.properties')}"]
SPARK_OPTIONS = ["--master", "local[*]", "--conf", "spark.ui.enabled=false", *QUIET_SPARK]


def say(text: str) -> None:
    """A step heading, on stdout like the reports it introduces (inspect, the plan), so the two
    stay in order (docs/cli-output.md)."""
    bold = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    note(f"\n\033[1m== {text}\033[0m" if bold else f"\n== {text}")


def note(text: str) -> None:
    print(text, flush=True)


def sparkrecover(*args: str, log=None) -> int:
    return subprocess.call(
        [sys.executable, "-m", "sparkrecover", *args], stdout=log, stderr=subprocess.STDOUT if log else None
    )


def stage_events(run_dir: str, kind: str) -> list[str]:
    """Stages with a ``stage.<kind>`` record in the journal, in journal order."""
    stages = []
    journal = os.path.join(run_dir, "journal")
    for name in sorted(os.listdir(journal)) if os.path.isdir(journal) else []:
        with open(os.path.join(journal, name), "rb") as handle:
            for line in handle.read().splitlines():
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a line being written right now
                if record.get("type") == f"stage.{kind}":
                    stages.append(record["stage"])
    return stages


def main() -> int:
    run_id = time.strftime("demo-%Y%m%d-%H%M%S")
    out = os.path.abspath(os.path.join("demo-output", run_id))
    os.makedirs(out, exist_ok=True)
    run_dir = os.path.join(".sparkrecover", run_id)
    app = [PIPELINE, out, "--rows", "400000", "--pause", "2"]

    say(f"1. submit: four stages (orders -> clean -> daily -> publish), journal in {run_dir}")
    started = time.monotonic()
    with open(os.path.join(out, "spark.log"), "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "sparkrecover", "submit", "--run-id", run_id, "--", *SPARK_OPTIONS, *app],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # The kill is decided from the journal: once the last stage, 'publish', has started, so
        # the plan below names every stage (the planner knows only the stages the journal saw).
        while "publish" not in stage_events(run_dir, "started"):
            if child.poll() is not None:
                print(f"the run ended early (exit {child.returncode}); see {out}/spark.log", file=sys.stderr)
                return 1
            time.sleep(0.1)
        os.killpg(child.pid, signal.SIGKILL)  # the driver, spark-submit and sparkrecover, all at once
        child.wait()
    committed = stage_events(run_dir, "committed")
    running = [stage for stage in stage_events(run_dir, "started") if stage not in committed]
    note(
        f"   SIGKILL of the whole driver after {time.monotonic() - started:.1f}s; the journal says: "
        f"committed {', '.join(committed) or 'nothing'}, running {', '.join(running) or 'nothing'}"
    )

    say("2. inspect: what the journal says happened")
    sparkrecover("inspect", run_id)

    say("3. resume --dry-run: what resume will do")
    sparkrecover("resume", run_id, "--dry-run")

    say("4. resume: relaunch, skipping what finished and survived")
    resumed = time.monotonic()
    with open(os.path.join(out, "spark.log"), "ab") as log:
        code = sparkrecover("resume", run_id, log=log)
    note(f"   resume exited {code} after {time.monotonic() - resumed:.1f}s")
    if code != 0:
        print(f"see {out}/spark.log", file=sys.stderr)
        return code

    say(f"5. inspect: {', '.join(committed) or 'no stage'} skipped, the others ran")
    sparkrecover("inspect", run_id)
    note(f"\nreport: {os.path.join(out, 'report.txt')}\njournal: {run_dir}/journal/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
