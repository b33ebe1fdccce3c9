"""End to end: the README's demo (scripts/demo.py) tells the truth.

The demo is run for real: the kill must land where its narration says, which is read from the
journal, and the dry-run table it shows must list every stage of the pipeline, those that will run
included (the planner knows only the stages the journal saw, so a kill before the last stage
started would hide it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import orjson
import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.e2e

DEMO = os.path.join(REPO, "scripts", "demo.py")
STAGES = ["orders", "clean", "daily", "publish"]


def _section(text: str, number: int) -> str:
    start = text.index(f"== {number}.")
    end = text.find(f"== {number + 1}.", start)
    return text[start : end if end >= 0 else len(text)]


def test_the_demo_narrates_what_the_journal_says_and_its_plan_lists_every_stage(tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": REPO}
    done = subprocess.run([sys.executable, DEMO], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = done.stderr + done.stdout
    assert done.returncode == 0, output[-4000:]
    plan = _section(output, 3)
    assert [stage for stage in STAGES if not re.search(rf"\b{stage}\b", plan)] == [], plan

    (run_id,) = os.listdir(tmp_path / ".sparkrecover")
    records = []
    journal = tmp_path / ".sparkrecover" / run_id / "journal"
    for name in sorted(os.listdir(journal)):
        records += [orjson.loads(line) for line in (journal / name).read_bytes().splitlines() if line.strip()]
    first = [r for r in records if r["attempt"] == 1]
    started = [r["stage"] for r in first if r["type"] == "stage.started"]
    committed = [r["stage"] for r in first if r["type"] == "stage.committed"]
    running = [stage for stage in started if stage not in committed]
    assert "publish" in started  # killed once the last stage had started, as the plan needs
    said = re.search(r"the journal says: committed (.*), running (.*)", _section(output, 1))
    assert said, _section(output, 1)
    assert said[1] == (", ".join(committed) or "nothing") and said[2] == (", ".join(running) or "nothing")
    # The resume skipped exactly what attempt 1 committed and ran the rest.
    second = [r for r in records if r["attempt"] == 2]
    assert [r["stage"] for r in second if r["type"] == "stage.skipped"] == committed
    assert [r["stage"] for r in second if r["type"] == "stage.committed"] == [s for s in STAGES if s not in committed]
