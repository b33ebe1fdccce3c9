"""Bad input gets one clear line and its exit code, and leaves nothing behind: a root that is a
file, mistyped options, run ids that cannot name a folder, a spark-submit that cannot start.

CLI plumbing only: a fake spark-submit (tests.helpers.fake_executable) stands in for Spark.
"""
from __future__ import annotations

import pytest

from tests.helpers import fake_executable


@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    return "app.py"


@pytest.fixture
def fake(tmp_path):
    """A spark-submit that records each launch (its arguments) and exits 0."""
    return fake_executable(tmp_path / "bin" / "spark-submit", f'echo "$@" >> {tmp_path}/launches\nexit 0')


def launches(tmp_path) -> list[str]:
    path = tmp_path / "launches"
    return path.read_text().splitlines() if path.exists() else []


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


# -- 1. a root that is a regular file ---------------------------------------------------------------

@pytest.mark.parametrize("command", [["inspect"], ["inspect", "--json"], ["inspect", "r1"],
                                     ["inspect", "r1", "--follow"], ["replay", "r1"], ["replay", "r1", "--verify"],
                                     ["resume", "r1"], ["resume", "r1", "--dry-run"], ["submit"]])
def test_a_root_that_is_a_file_is_a_usage_error_for_every_command(cli, tmp_path, app, fake, command):
    (tmp_path / "afile").write_text("not a folder\n")
    extra = ["--spark-submit", fake, "--", app] if command == ["submit"] else []
    code, out, err = cli(*command, "--root", "afile", *extra)
    assert (code, out) == (2, "")
    assert one_line(err) == f"error: the root {tmp_path / 'afile'} is not a folder (--root afile)"
    assert launches(tmp_path) == []
    assert (tmp_path / "afile").read_text() == "not a folder\n"


def test_a_root_below_a_file_and_one_from_the_environment_are_refused_too(cli, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    code, _, err = cli("inspect", "--root", "afile/runs")
    assert code == 2
    assert one_line(err) == f"error: the root {tmp_path / 'afile' / 'runs'} is not a folder (--root afile/runs)"
    monkeypatch.setenv("SPARKRECOVER_ROOT", str(tmp_path / "afile"))
    code, _, err = cli("resume", "r1")
    assert code == 2
    assert one_line(err) == f"error: the root {tmp_path / 'afile'} is not a folder ($SPARKRECOVER_ROOT)"


def test_completion_under_a_root_that_is_a_file_offers_nothing_and_says_nothing(cli, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("_SPARKRECOVER_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "sparkrecover resume --root afile ")
    monkeypatch.setenv("COMP_CWORD", "4")
    code, out, err = cli()
    assert (code, out.split(), err) == (0, [], "")
