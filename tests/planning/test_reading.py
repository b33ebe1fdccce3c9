"""A command folds a run's journal once: before its first launch, then only what its attempts added."""

from __future__ import annotations

import os

import pytest

from sparkrecover.core.views import summary
from sparkrecover.planning import reading
from tests import journals
from tests.helpers import fake_executable


def view(state):
    """What inspect shows of a run: equal views, equal folds."""
    return summary.run_summary(state, "run-dir", lease_live=False)


def test_folding_on_after_an_attempt_is_folding_whole(tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    before = reading.load_state(run.ref)
    run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"})
    run.skipped("orders", "committed in attempt 1, output verified").done("daily", ("clean",), rows=30).end(0)

    caught_up = reading.catch_up(before, run.ref, since=2)
    whole = reading.load_state(run.ref)
    assert caught_up.event_count == whole.event_count and sorted(caught_up.attempts) == [1, 2]
    assert view(caught_up) == view(whole)
    assert reading.catch_up(None, run.ref, since=1).event_count == whole.event_count


@pytest.mark.parametrize("command", ["submit", "resume"])
def test_a_command_with_retries_reads_each_record_of_the_journal_once(cli, tmp_path, monkeypatch, command):
    """Three attempts (two automatic retries): every record of the journal is folded exactly once,
    the summary included (it renders the state the retry loop kept current)."""
    root = tmp_path / "root"
    if command == "resume":
        journals.crashed_run(root)
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    failing = fake_executable(tmp_path / "fake-submit", "exit 1")
    folded = []
    real = reading.iter_journal

    def counting(*args, **kwargs):
        for record in real(*args, **kwargs):
            folded.append((record["attempt"], record["writer"], record["seq"]))
            yield record

    monkeypatch.setattr(reading, "iter_journal", counting)
    monkeypatch.chdir(tmp_path)
    args = ["--root", str(root), "--spark-submit", failing, "--max-attempts", "3"]
    if command == "submit":
        code, _, err = cli("submit", "--run-id", "nightly", *args, "--", "app.py")
    else:
        code, _, err = cli("resume", "nightly", *args)
    assert code == 1, err
    summary_line = "run nightly: failed (exit 1), attempts " + ("1-3" if command == "submit" else "2-4")
    assert summary_line in err.splitlines()
    written = [(r["attempt"], r["writer"], r["seq"]) for r in reading.read_journal(os.path.join(root, "nightly"))]
    assert sorted(folded) == sorted(written) and len(set(folded)) == len(folded)
    assert max(attempt for attempt, _, _ in written) == (3 if command == "submit" else 4)
