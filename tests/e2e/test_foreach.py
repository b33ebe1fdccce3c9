"""A foreachPartition killed at 70 % of its partitions, end to end (real spark-submit, real SIGKILL):
the resume runs the side effect only for the partitions whose tasks had not finished, as Spark
itself retries only unfinished tasks."""

from __future__ import annotations

import os

import pytest

from tests.e2e.support import APPS, run_and_kill, submit_command, task_commits
from tests.helpers import dry_run, run_cli

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "foreach_app.py")
PARTS, FINISHED = 10, 7


def lines(out: str) -> dict[int, list[str]]:
    found = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as handle:
            found[int(name.split("-")[1])] = handle.read().splitlines()
    return found


def test_a_foreach_partition_killed_at_70_percent_runs_only_the_unfinished_partitions_again(tmp_path):
    root, out, gate = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "gate")
    run_dir = os.path.join(root, "sink")
    command = submit_command(root, "sink", APP, out, gate, str(PARTS), str(FINISHED))
    # local[2]: partitions 0-6 finish; 7 and 8 write their line and wait for the gate, holding both
    # slots. The driver dies once the journal has the 7 finished tasks and both lines are written.
    running = [FINISHED, FINISHED + 1]
    run_and_kill(
        command,
        lambda: (
            task_commits(run_dir, 1) >= FINISHED
            and all(os.path.exists(os.path.join(out, f"part-{p:03d}")) for p in running)
        ),
        f"{FINISHED} finished tasks",
    )
    first = lines(out)
    assert sorted(first) == list(range(FINISHED + 2)), first

    (stage,) = dry_run(root, "sink")["stages"]
    assert stage["decision"] == "continue", stage
    assert stage["partitions"] == {"kept": FINISHED, "total": PARTS}
    assert stage["reason"] == f"{FINISHED}/{PARTS} partitions kept (finished in attempt 1)"

    open(gate, "w").close()
    resumed = run_cli("resume", "sink", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = lines(out)
    assert sorted(after) == list(range(PARTS))
    driver_1 = first[0][0].split()[0]
    (driver_2,) = {after[p][-1].split()[0] for p in range(FINISHED, PARTS)}
    assert driver_2 != driver_1
    # Each finished partition's side effect ran once; the two running at the kill ran again (at
    # least once, as Spark retries a task), and the rest ran once, in the resume.
    assert {p: len(found) for p, found in after.items()} == {p: 2 if p in running else 1 for p in range(PARTS)}
    assert all(after[p] == [f"{driver_1} 10"] for p in range(FINISHED))
    assert all(after[p][-1] == f"{driver_2} 10" for p in range(FINISHED, PARTS))
