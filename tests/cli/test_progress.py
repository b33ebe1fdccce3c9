"""The progress bar of long verifications: on a terminal only, never on a pipe or with --json."""

from __future__ import annotations

import io

from rich.console import Console

from sparkrecover.cli import render, resume
from sparkrecover.launch.options import RunOptions
from tests import journals


def terminal(monkeypatch) -> io.StringIO:
    monkeypatch.setenv("TERM", "xterm")
    screen = io.StringIO()
    render._console = Console(file=screen, force_terminal=True, width=100, color_system=None)
    return screen


def big_run(root):
    """A committed stage of many files, then a crash."""
    run = journals.SyntheticRun(root).attempt()
    files = {f"part-{i:05d}.parquet": b"x" for i in range(1200)}
    run.started("orders").committed("orders", files=files)
    return run.done("clean", ("orders",)).crash()


def test_resume_shows_verification_progress_on_a_terminal(monkeypatch, tmp_path, capsys):
    big_run(tmp_path / "root")
    screen = terminal(monkeypatch)
    assert (
        resume.run(
            RunOptions(root=str(tmp_path / "root"), json_output=False),
            run="nightly",
            dry_run=True,
            rerun=(),
            from_scratch=False,
            verify="size",
            extra=[],
        )
        == 0
    )
    drawn = screen.getvalue()
    assert "verifying outputs" in drawn and "1,202 files" in drawn  # 1,200 in orders, 2 in clean
    # the bar on stderr, the plan (what a dry run exists to show) on stdout
    assert "resume plan for run nightly, attempt 2" in capsys.readouterr().out


def test_no_progress_with_json_even_on_a_terminal(monkeypatch, tmp_path, capsys):
    big_run(tmp_path / "root")
    screen = terminal(monkeypatch)
    resume.run(
        RunOptions(root=str(tmp_path / "root"), json_output=True),
        run="nightly",
        dry_run=True,
        rerun=(),
        from_scratch=False,
        verify="size",
        extra=[],
    )
    assert screen.getvalue() == ""
    assert '"decision": "skip"' in capsys.readouterr().out


def test_no_progress_on_a_pipe(cli, tmp_path):
    big_run(tmp_path / "root")
    code, _out, err = cli("resume", "nightly", "--root", str(tmp_path / "root"), "--dry-run")
    assert code == 0 and "verifying" not in err and "files" not in err


def test_the_callback_is_none_off_a_terminal():
    with render.file_progress() as progress:
        assert progress is None
