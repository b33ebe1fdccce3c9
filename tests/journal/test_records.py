"""One check of every journal record, the same for every command (issue: a stage event without its
stage was an internal error in one command and "OK" in another)."""

from __future__ import annotations

import os

import pytest

from tests import journals


def _drop_stage_from_first_commit(run) -> str:
    path = os.path.join(run.dir, "journal", "0001-driver-000000.jsonl")
    lines = open(path, "rb").read().split(b"\n")
    number = next(i for i, line in enumerate(lines) if b'"type":"stage.committed"' in line)
    lines[number] = lines[number].replace(b'"stage":"orders",', b"")
    assert b'"stage"' not in lines[number]
    with open(path, "wb") as handle:
        handle.write(b"\n".join(lines))
    return f"{path}:{number + 1}"


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "nightly"],
        ["resume", "nightly", "--dry-run"],
        ["replay", "nightly"],
        ["replay", "nightly", "--verify"],
        ["inspect"],
    ],
)
def test_a_stage_event_without_its_stage_is_corruption_everywhere(cli, tmp_path, command):
    run = journals.crashed_run(tmp_path / "root")
    where = _drop_stage_from_first_commit(run)
    code, out, err = cli(*command, "--root", str(tmp_path / "root"))
    # An error on stderr; replay --verify and the run list report the finding on stdout.
    flat = " ".join((err if code == 3 and command != ["replay", "nightly", "--verify"] else out + err).split())
    assert "Traceback" not in out + err and "internal error" not in out + err
    if command == ["inspect"]:  # the list goes on, and shows the run as unreadable
        assert code == 0 and "unreadable" in flat
        assert f"{where}: stage.committed event without 'stage'" in flat
        return
    assert code == 3
    assert f"{where}: stage.committed event without 'stage'" in flat


def test_a_payload_field_of_the_wrong_type_is_named():
    from sparkrecover.journal.events import record_problem

    record = {
        "v": 1,
        "type": "task.committed",
        "run": "r",
        "attempt": 1,
        "writer": "driver",
        "seq": 0,
        "ts": "2026-11-22T03:00:00.000Z",
        "stage": "s",
        "partition": "3",
    }
    assert record_problem(record, 1, "driver") == "task.committed event whose 'partition' is not a int: '3'"
    record["partition"] = 3
    assert record_problem(record, 1, "driver") is None
