"""End to end on real Spark: follow a real run while it runs, then replay and verify its journal.

One spark-submit. It proves what the synthetic tests cannot: the lease held by another
process, the driver's buffered flushes, the listener's real events, and a verifier that finds
nothing wrong with a journal the real writers wrote.
"""

from __future__ import annotations

import os
import subprocess
import time

import orjson
import pytest

from tests.e2e.support import PIPELINE
from tests.helpers import SPARK_OPTIONS, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e


def test_follow_a_real_run_to_its_end_then_replay_it(tmp_path):
    root, out = str(tmp_path / "root"), str(tmp_path / "out")
    run_dir = os.path.join(root, "live")
    submit = subprocess.Popen(
        sparkrecover_command(
            "submit",
            "--root",
            root,
            "--run-id",
            "live",
            "--",
            *SPARK_OPTIONS,
            PIPELINE,
            out,
            "--rows",
            "20000",
            "--pause",
            "0.5",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(run_dir, "lease.json")):  # submit takes the lease first
            assert submit.poll() is None and time.monotonic() < deadline, "submit never took the lease"
            time.sleep(0.05)
        followed = run_cli("inspect", "live", "--root", root, "--follow", timeout=300)
        assert submit.wait(timeout=60) == 0
    finally:
        if submit.poll() is None:
            submit.kill()
    assert followed.returncode == 0, followed.stderr[-3000:]
    lines = followed.stdout.splitlines()  # the report; "following run ..." is on stderr
    committed = [line.split()[4] for line in lines if " stage.committed " in line]
    assert committed == ["orders", "clean", "daily", "publish"]
    assert "run live: attempt 1 ended: succeeded (exit 0)" in lines
    assert lines.index("run live: attempt 1 ended: succeeded (exit 0)") > max(
        i for i, line in enumerate(lines) if " attempt.ended " in line
    )
    assert "run live  succeeded" in lines

    verified = run_cli("replay", "live", "--root", root, "--verify")
    assert (verified.returncode, verified.stdout.splitlines()[-1]) == (0, "journal OK: 0 problems, 0 warnings")

    events = orjson.loads(run_cli("replay", "live", "--root", root, "--json").stdout)["events"]
    clean = next(e["index"] for e in events if e["type"] == "stage.committed" and e["stage"] == "clean")
    then = run_cli("replay", "live", "--root", root, "--json", "--until", str(clean))
    plan = orjson.loads(then.stdout)["plan"]
    assert [(s["stage"], s["decision"]) for s in plan["stages"]] == [("orders", "skip"), ("clean", "skip")]
