"""A damaged journal: the message names the file and line and what to do; a dry run of
``resume --from-scratch`` plans it without moving anything (the launch is tests/e2e/test_e2e_resume.py).

CLI plumbing only: a fake spark-submit (tests.helpers.fake_executable) makes the run's journal."""

from __future__ import annotations

import json
import os

from tests.helpers import fake_executable


def damaged_run(cli, tmp_path) -> str:
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    fake = fake_executable(tmp_path / "fake-submit", "exit 1")
    code, _, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", "app.py")
    assert code == 1, err
    segment = tmp_path / "runs" / "r1" / "journal" / "0001-cli-000000.jsonl"
    lines = segment.read_bytes().split(b"\n")
    segment.write_bytes(b"\n".join([lines[0], b"{not json", *lines[1:]]))
    return str(segment)


def test_a_damaged_journal_names_the_file_and_line_and_what_to_do(cli, tmp_path):
    segment = damaged_run(cli, tmp_path)
    code, out, err = cli("resume", "r1", "--root", "runs")
    assert (code, out) == (3, "")
    said = " ".join(err.split())
    assert f"{segment}:2: malformed journal line" in said
    # The hints name the root: without it they would act on a run r1 under the default root.
    root = tmp_path / "runs"
    assert f"sparkrecover replay r1 --root {root} --verify" in said
    assert f"sparkrecover resume r1 --root {root} --from-scratch" in said
    assert "Traceback" not in err


def test_a_dry_run_from_scratch_plans_a_damaged_journal_and_moves_nothing(cli, tmp_path):
    segment = damaged_run(cli, tmp_path)
    before = sorted(os.listdir(tmp_path / "runs" / "r1"))
    code, out, err = cli("resume", "r1", "--root", "runs", "--dry-run", "--from-scratch", "--json")
    assert code == 0, err
    assert json.loads(out)["attempt"] == 2
    assert "0001-cli-000000.jsonl" in err and "sets those segments aside" in " ".join(err.split())
    assert sorted(os.listdir(tmp_path / "runs" / "r1")) == before and os.path.exists(segment)
