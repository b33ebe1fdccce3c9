"""A foreachPartition killed at 70 % of its partitions, end to end (real spark-submit, real SIGKILL):
the resume runs the side effect only for the partitions whose tasks had not finished, as Spark
itself retries only unfinished tasks."""

from __future__ import annotations

import os

import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.journal import read_journal
from tests.helpers import SPARK_OPTIONS, dry_run, run_and_kill_when, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e
APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "apps", "foreach_app.py")
PARTS, FINISHED = 10, 7


def finished_tasks(run_dir: str) -> int:
    """Partitions of the foreach whose tasks attempt 1 journaled as finished, as the fold reads them."""
    state = RunState.from_events("sink", read_journal(run_dir))
    return sum(1 for stage in state.stages.values() for by, _ in stage.committed_tasks.values() if by == 1)


def lines(out: str) -> dict[int, list[str]]:
    found = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as handle:
            found[int(name.split("-")[1])] = handle.read().splitlines()
    return found


def test_a_foreach_partition_killed_at_70_percent_runs_only_the_unfinished_partitions_again(tmp_path):
    root, out, gate = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "gate")
    run_dir = os.path.join(root, "sink")
    command = sparkrecover_command(
        "submit", "--root", root, "--run-id", "sink", "--", *SPARK_OPTIONS, APP, out, gate, str(PARTS), str(FINISHED)
    )
    # local[2]: partitions 0-6 finish; 7 and 8 write their line and wait for the gate, holding both
    # slots. The driver dies once the journal has the 7 finished tasks and both lines are written.
    running = [FINISHED, FINISHED + 1]
    run_and_kill_when(
        command,
        lambda: (
            finished_tasks(run_dir) >= FINISHED
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
