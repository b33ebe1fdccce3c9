"""Bad input gets one clear line and its exit code, and leaves nothing behind: a root that is a
file, mistyped options, run ids that cannot name a folder, a spark-submit that cannot start.

CLI plumbing only: a fake spark-submit (tests.helpers.fake_executable) stands in for Spark.
"""

from __future__ import annotations

import glob
import os
import stat

import pytest

from sparkrecover.journal import read_journal
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


@pytest.mark.parametrize(
    "command",
    [
        ["inspect"],
        ["inspect", "--json"],
        ["inspect", "r1"],
        ["inspect", "r1", "--follow"],
        ["replay", "r1"],
        ["replay", "r1", "--verify"],
        ["resume", "r1"],
        ["resume", "r1", "--dry-run"],
        ["submit"],
    ],
)
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


# -- 2. mistyped options before --, and run ids ------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--run-idd", "x"],
            "no such option --run-idd (neither sparkrecover's nor spark-submit's): did you mean --run-id?",
        ),
        (
            ["--max-attempt", "2"],
            "no such option --max-attempt (neither sparkrecover's nor spark-submit's): did you mean --max-attempts?",
        ),
        (
            ["--max-attempt=2"],
            "no such option --max-attempt (neither sparkrecover's nor spark-submit's): did you mean --max-attempts?",
        ),
        (["--dry-run"], "no such option --dry-run: it is an option of resume, not of submit"),
        (["--bogus"], "no such option --bogus (neither sparkrecover's nor spark-submit's)"),
        (
            ["--master", "local[2]", "--run-id", "x"],
            "--run-id is sparkrecover's option: give it before spark-submit's options, or before --",
        ),
    ],
)
def test_an_option_nobody_knows_before_the_double_dash_launches_nothing(cli, tmp_path, app, fake, args, message):
    code, out, err = cli("submit", "--spark-submit", fake, *args, app)
    assert (code, out) == (2, "")
    assert one_line(err) == f"error: {message}"
    assert launches(tmp_path) == []
    assert not (tmp_path / ".sparkrecover").exists()


def test_spark_submit_options_pass_through_untouched(cli, tmp_path, app, fake):
    """Known spark-submit options before the application, anything after --, and the application's
    own arguments reach spark-submit as given."""
    code, _, err = cli(
        "submit",
        "--run-id",
        "a",
        "--spark-submit",
        fake,
        "--master",
        "local[2]",
        "--conf=spark.x=1",
        "-v",
        "--driver-java-options",
        "-Dx=1",
        app,
        "--bogus",
        "1",
    )
    assert code == 0, err
    code, _, err = cli("submit", "--run-id", "b", "--spark-submit", fake, "--", "--some-future-option=x", app)
    assert code == 0, err
    first, second = launches(tmp_path)
    assert first.startswith("--master local[2] --conf=spark.x=1 -v --driver-java-options -Dx=1 ")
    assert first.endswith(f"-- {tmp_path / 'app.py'} --bogus 1")
    assert second.startswith("--some-future-option=x ")


@pytest.mark.parametrize("run_id", ["", "a/b", "..", ".hidden", "a b", "x" * 129])
def test_a_run_id_that_cannot_name_a_folder_is_refused(cli, tmp_path, app, fake, run_id):
    code, out, err = cli("submit", "--run-id", run_id, "--spark-submit", fake, "--", app)
    assert (code, out) == (2, "")
    assert one_line(err).startswith(f"error: invalid run id {run_id!r}")
    assert launches(tmp_path) == []
    assert not (tmp_path / ".sparkrecover").exists()


# -- 10. attempt.started only once spark-submit really started ---------------------------------------


def test_a_missing_spark_submit_on_resume_leaves_no_attempt_behind(cli, tmp_path, app):
    fake = fake_executable(tmp_path / "bin" / "spark-submit", "exit 1")
    code, _, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--", app)
    assert code == 1, err
    run_dir = str(tmp_path / "runs" / "r1")
    before = read_journal(run_dir)
    os.remove(fake)
    code, out, err = cli("resume", "r1", "--root", "runs")
    assert (code, out) == (2, "")
    assert err.strip().splitlines()[-1] == f"error: could not start {fake}: No such file or directory"
    assert read_journal(run_dir) == before  # no attempt 2: nothing started, nothing crashed
    code, out, err = cli("resume", "r1", "--root", "runs", "--spark-submit", str(tmp_path / "absent"))
    assert (code, out) == (2, "")
    assert err.strip().splitlines()[-1].endswith("absent: not found or not executable")
    assert read_journal(run_dir) == before


def test_a_spark_submit_that_cannot_start_on_submit_journals_no_attempt(cli, tmp_path, app):
    broken = tmp_path / "bin" / "spark-submit"
    broken.parent.mkdir()
    broken.write_bytes(b"\x7fELF not really")  # executable, but not a program: exec fails
    broken.chmod(0o755)
    code, out, err = cli("submit", "--root", "runs", "--run-id", "r1", "--spark-submit", str(broken), "--", app)
    assert (code, out) == (2, "")
    assert err.strip().splitlines()[-1] == f"error: could not start {broken}: Exec format error"
    assert not os.path.exists(tmp_path / "runs" / "r1" / "journal")


# -- 11. the crash log -----------------------------------------------------------------------------


def test_the_crash_log_is_private_and_holds_the_redacted_command_line(cli, tmp_path, app, fake, monkeypatch):
    import tempfile

    from sparkrecover.launch import recovery

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()

    def boom(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(recovery, "submit", boom)
    code, _, err = cli(
        "submit", "--spark-submit", fake, "--", "--conf", "spark.db.password=hunter2", app, "--token", "s3cr3t"
    )
    assert code == 70
    assert "internal error: RuntimeError: a bug" in err
    (log,) = glob.glob(str(tmp_path / "tmp" / "sparkrecover-crash-*.log"))
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    text = open(log, encoding="utf-8").read()
    assert "hunter2" not in text and "s3cr3t" not in text
    assert "'spark.db.password=*****'" in text and "'--token', '*****'" in text
    assert "RuntimeError: a bug" in text


def test_the_exit_code_table_puts_a_root_that_is_a_file_under_the_code_it_exits_with(cli, tmp_path):
    """docs/commands.md is where a script's author looks the code up: it must say what the CLI does."""
    (tmp_path / "afile").write_text("")
    code, _, _ = cli("inspect", "--root", "afile")
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")
    with open(os.path.join(docs, "commands.md")) as handle:
        table = {
            cells[1].strip(): cells[2]
            for cells in (line.split("|") for line in handle if line.startswith("| ") and line.count("|") >= 3)
        }
    assert "a root that is a file" in table[str(code)]
    assert all("a root that is a file" not in text for number, text in table.items() if number != str(code))
