"""Which stream says what (docs/cli-output.md): reports and --json on stdout; what submit and resume
say, with the application's own output, on stderr; and how submit and resume end (a summary, or
one JSON document). The launches use a fake spark-submit: only the plumbing is under test here."""

from __future__ import annotations

import orjson
import pytest

from tests import journals
from tests.helpers import fake_executable, run_cli


@pytest.mark.parametrize(
    "command, shown",
    [
        (["inspect", "nightly"], "run nightly  crashed"),
        (["inspect"], "runs under"),
        (["replay", "nightly"], "stage.started"),
        (["replay", "nightly", "--until", "13"], "what resume --dry-run would have decided then"),
        (["replay", "nightly", "--verify"], "journal OK"),
        (["resume", "nightly", "--dry-run"], "resume plan for run nightly, attempt 2"),
    ],
)
def test_what_a_report_exists_to_show_is_on_stdout(cli, tmp_path, command, shown):
    journals.crashed_run(tmp_path / "root")
    code, out, err = cli(*command, "--root", str(tmp_path / "root"))
    assert (code, err) == (0, "")
    assert shown in out


def test_inspect_of_a_run_is_on_stdout_whole_for_grep(cli, tmp_path):
    journals.crashed_run(tmp_path / "root")
    _code, out, _ = cli("inspect", "nightly", "--root", str(tmp_path / "root"))
    assert [line for line in out.splitlines() if "unfinished" in line] == [
        "│ daily  │ unfinished │       1 │        - │     - │       - │    1 │            1 │     4 │ 1 task   │"
    ]


# -- submit and resume: their own messages on stderr, a summary at the end, --json alone on stdout ---


@pytest.fixture
def talkative(tmp_path):
    """A spark-submit that prints to stdout as applications do, then exits 0."""
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    return fake_executable(tmp_path / "fake-submit", "echo 'hello from the app'\necho 'a Spark warning' >&2\nexit 0")


def test_submit_json_is_one_document_on_stdout(tmp_path, talkative):
    result = run_cli(
        "submit",
        "--root",
        "runs",
        "--run-id",
        "r1",
        "--spark-submit",
        talkative,
        "--json",
        "--",
        "app.py",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    document = orjson.loads(result.stdout)  # nothing else on stdout
    assert "hello from the app" in result.stderr  # the application's stdout went to stderr
    assert {key: document[key] for key in ("run", "outcome", "exit_code", "stages", "kept_partitions")} == {
        "run": "r1",
        "outcome": "succeeded",
        "exit_code": 0,
        "stages": [],
        "kept_partitions": 0,
    }
    assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in document["attempts"]] == [(1, "succeeded", 0)]
    assert document["run_dir"] == str(tmp_path / "runs" / "r1") and document["saved_s"] == 0


def test_without_json_the_application_keeps_its_stdout_and_submit_ends_with_a_summary(tmp_path, talkative):
    result = run_cli(
        "submit", "--root", "runs", "--run-id", "r1", "--spark-submit", talkative, "--", "app.py", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from the app\n"
    assert result.stderr.splitlines()[-2:] == ["run r1: succeeded (exit 0), attempt 1", "stages: none recorded"]


def crashed(root):
    """a committed (1.0s), b started; the driver killed."""
    run = journals.Run(root).start_attempt()
    return run.done("a").started("b", ["a"]).end(137, 9)


def test_resume_json_says_what_each_stage_was_and_what_recovery_saved(tmp_path, talkative):
    crashed(tmp_path / "runs")
    result = run_cli("resume", "r1", "--root", "runs", "--spark-submit", talkative, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = orjson.loads(result.stdout)
    assert "hello from the app" in result.stderr
    # The plan skipped a, but the fake application skipped nothing: recovery saved nothing.
    assert (document["run"], document["outcome"], document["exit_code"], document["saved_s"]) == (
        "r1",
        "succeeded",
        0,
        0,
    )
    assert document["saved"] == (
        "recovery saved nothing: no stage, partition, map output or action of an earlier attempt was reused"
    )
    assert [(a["attempt"], a["plan"]) for a in document["attempts"]] == [(2, {"skip": 1, "run": 1})]
    assert [(s["stage"], s["decision"], s["outcome"]) for s in document["stages"]] == [
        ("a", "skip", "committed"),  # the fake skipped nothing either
        ("b", "run", "unfinished"),  # the fake ran nothing
    ]


def test_resume_ends_with_a_summary_on_stderr(tmp_path, talkative):
    crashed(tmp_path / "runs")
    result = run_cli("resume", "r1", "--root", "runs", "--spark-submit", talkative, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from the app\n"
    assert result.stderr.splitlines()[-4:] == [
        "run r1: succeeded (exit 0), attempt 2",
        "stages: 0 skipped, 0 run, 2 not reached (of 2)",  # the fake ran nothing of the plan
        "recovery saved nothing: no stage, partition, map output or action of an earlier attempt was reused",
        "to see the run as a page: sparkrecover report r1 --root runs",
    ]


def test_an_automatic_retry_shows_its_plan_and_the_summary_counts_every_attempt(tmp_path):
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    # Fails the first time, succeeds the second: --max-attempts resumes once, automatically.
    fake = fake_executable(
        tmp_path / "fake-submit", f"if [ -e {tmp_path}/once ]; then exit 0; fi\ntouch {tmp_path}/once\nexit 1"
    )
    result = run_cli(
        "submit", "--root", "runs", "--run-id", "r1", "--spark-submit", fake, "--max-attempts", "2", "--", "app.py",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "attempt 1 failed (exit 1); resuming automatically (2 of 2)" in lines
    assert "resume plan for run r1, attempt 2" in lines  # as a manual resume shows it
    assert lines[-4:-1] == [
        "run r1: succeeded (exit 0), attempts 1-2",
        "stages: none recorded",
        "recovery saved nothing: no stage, partition, map output or action of an earlier attempt was reused",
    ]
    assert lines[-1].startswith("to see the run as a page: sparkrecover report r1")


def test_submit_of_a_finished_run_launches_nothing_and_says_so(cli, tmp_path, talkative):
    journals.clean_run(tmp_path / "root")
    args = ("submit", "--root", str(tmp_path / "root"), "--run-id", "nightly", "--spark-submit", talkative)
    code, out, err = cli(*args, "--", "app.py")
    assert (code, out) == (0, "")
    assert err.splitlines()[-2:] == [
        "run nightly already completed successfully; nothing to do",
        "run nightly: succeeded (exit 0), no attempt launched",
    ]
    code, out, _ = cli(*args, "--json", "--", "app.py")
    document = orjson.loads(out)
    assert (document["attempts"], [s["decision"] for s in document["stages"]]) == ([], [None, None, None])
