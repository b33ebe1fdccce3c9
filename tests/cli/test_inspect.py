"""inspect on synthetic journals (no Spark): whole outputs, with NO_COLOR and 120 columns."""

from __future__ import annotations

import os

import orjson
import pytest

from tests import journals
from tests.helpers import on_screen, screen

RESUMED = """\
run nightly  succeeded
app:        /jobs/etl.py
root:       <tmp>/root
journal:    <tmp>/root/nightly
time:       14.0s from first to last event, 13.0s in 2 attempts
stages
┏━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┓
┃ stage  ┃ status    ┃ attempt ┃ duration ┃  rows ┃ written ┃ jobs ┃ spark stages ┃ tasks ┃ failures ┃
┡━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━┩
│ orders │ skipped   │       1 │     2.0s │ 1,000 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ clean  │ skipped   │       1 │     2.0s │   800 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ daily  │ committed │       2 │     2.0s │    30 │ 3.0 KiB │    2 │            2 │     6 │ 1 task   │
└────────┴───────────┴─────────┴──────────┴───────┴─────────┴──────┴──────────────┴───────┴──────────┘
  orders, clean: skipped in attempt 2: committed in attempt 1, output verified
attempts
┏━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ attempt     ┃ outcome   ┃ exit ┃ started (UTC)       ┃ duration ┃ plan          ┃ application id   ┃
┡━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│ 1           │ crashed   │ -    │ 2026-11-22 03:00:01 │ 7.5s     │ -             │ local-1700000001 │
│ 2 (resumed) │ succeeded │ 0    │ 2026-11-22 03:00:09 │ 5.5s     │ 2 skip, 1 run │ local-1700000002 │
└─────────────┴───────────┴──────┴─────────────────────┴──────────┴───────────────┴──────────────────┘
"""


def inspect(cli, tmp_path, *args):
    return on_screen(cli, tmp_path, "inspect", *args)


def test_clean_run(cli, tmp_path):
    journals.clean_run(tmp_path / "root")
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, err) == (0, "")
    assert (
        out
        == """\
run nightly  succeeded
app:        /jobs/etl.py
root:       <tmp>/root
journal:    <tmp>/root/nightly
time:       9.5s from first to last event, 9.0s in 1 attempt
stages
┏━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┓
┃ stage  ┃ status    ┃ attempt ┃ duration ┃  rows ┃ written ┃ jobs ┃ spark stages ┃ tasks ┃ failures ┃
┡━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━┩
│ orders │ committed │       1 │     2.0s │ 1,000 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ clean  │ committed │       1 │     2.0s │   800 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ daily  │ committed │       1 │     2.0s │    30 │ 3.0 KiB │    1 │            1 │     2 │ -        │
└────────┴───────────┴─────────┴──────────┴───────┴─────────┴──────┴──────────────┴───────┴──────────┘
attempts
┏━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ attempt ┃ outcome   ┃ exit ┃ started (UTC)       ┃ duration ┃ plan ┃ application id   ┃
┡━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│ 1       │ succeeded │ 0    │ 2026-11-22 03:00:01 │ 9.0s     │ -    │ local-1700000001 │
└─────────┴───────────┴──────┴─────────────────────┴──────────┴──────┴──────────────────┘
"""
    )


def test_crashed_run_says_where_it_died_and_what_to_run_next(cli, tmp_path):
    journals.crashed_run(tmp_path / "root")
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, err) == (0, "")
    assert (
        out
        == """\
run nightly  crashed
app:        /jobs/etl.py
root:       <tmp>/root
journal:    <tmp>/root/nightly
time:       8.0s from first to last event, 7.5s in 1 attempt
stopped in: daily (started, never committed)
stages
┏━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┓
┃ stage  ┃ status     ┃ attempt ┃ duration ┃  rows ┃ written ┃ jobs ┃ spark stages ┃ tasks ┃ failures ┃
┡━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━┩
│ orders │ committed  │       1 │     2.0s │ 1,000 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ clean  │ committed  │       1 │     2.0s │   800 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ daily  │ unfinished │       1 │        - │     - │       - │    1 │            1 │     4 │ 1 task   │
└────────┴────────────┴─────────┴──────────┴───────┴─────────┴──────┴──────────────┴───────┴──────────┘
attempts
┏━━━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ attempt ┃ outcome ┃ exit ┃ started (UTC)       ┃ duration ┃ plan ┃ application id   ┃
┡━━━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│ 1       │ crashed │ -    │ 2026-11-22 03:00:01 │ 7.5s     │ -    │ local-1700000001 │
└─────────┴─────────┴──────┴─────────────────────┴──────────┴──────┴──────────────────┘
what resume would do now: sparkrecover resume nightly --root <tmp>/root --dry-run
"""
    )


def test_resumed_run(cli, tmp_path):
    journals.resumed_run(tmp_path / "root")
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, out, err) == (0, RESUMED, "")


def test_run_directory_url_shows_the_same(cli, tmp_path):
    run = journals.resumed_run(tmp_path / "root")
    code, out, err = cli("inspect", "file://" + run.dir)
    assert (code, screen(out, tmp_path), err) == (0, RESUMED, "")


def test_invalidated_stage_shows_why_and_failed_attempt(cli, tmp_path):
    journals.invalidated_run(tmp_path / "root")
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:5] == [
        "run nightly  succeeded",
        "app:        /jobs/etl.py",
        "root:       <tmp>/root",
        "journal:    <tmp>/root/nightly",
        "time:       16.5s from first to last event, 15.5s in 2 attempts",
    ]
    assert lines[9:15] == [
        "│ orders │ skipped   │       1 │     2.0s │ 1,000 │ 3.0 KiB │    1 │            1 │     2 │ -        │",
        "│ clean  │ committed │       2 │     2.0s │   900 │ 3.0 KiB │    2 │            2 │     4 │ -        │",
        "│ daily  │ committed │       2 │     2.0s │    31 │ 3.0 KiB │    1 │            1 │     2 │ -        │",
        "└────────┴───────────┴─────────┴──────────┴───────┴─────────┴──────┴──────────────┴───────┴──────────┘",
        "  orders: skipped in attempt 2: committed in attempt 1, output verified",
        "  clean: invalidated in attempt 2: fingerprint changed: version None -> 2",
    ]
    assert lines[-3:] == [
        "│ 1           │ failed    │ 1    │ 2026-11-22 03:00:01 │ 7.5s     │ -             │ local-1700000001 │",
        "│ 2 (resumed) │ succeeded │ 0    │ 2026-11-22 03:00:09 │ 8.0s     │ 2 skip, 1 run │ local-1700000002 │",
        "└─────────────┴───────────┴──────┴─────────────────────┴──────────┴───────────────┴──────────────────┘",
    ]
    assert "last error" not in err  # attempt 2 got past it: history, which replay shows


def test_a_stage_invalidated_and_not_rebuilt_yet(cli, tmp_path):
    run = journals.SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").end(0)
    run.attempt(plan={"orders": "skip"}).invalidated("orders", "code changed").crash()
    _code, out, _ = inspect(cli, tmp_path, "nightly", "--json")
    stage = orjson.loads(out)["stages"][0]
    assert (stage["status"], stage["invalidated"], stage["reason"]) == (
        "invalidated",
        {"attempt": 2, "reason": "code changed"},
        "code changed",
    )


def test_failed_run_shows_the_error_and_failures(cli, tmp_path):
    run = journals.SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").started("clean", ("orders",))
    run.spark_work("clean", tasks=8, failed_tasks=4, failure="Job aborted due to stage failure")
    run.failed("clean", "Py4JJavaError: An error occurred while calling o99.save.\n\tat Foo.bar")
    run.end(1, error="Py4JJavaError: An error occurred while calling o99.save.")
    _code, out, _err = inspect(cli, tmp_path, "nightly")
    lines = out.splitlines()
    assert lines[0] == "run nightly  failed"
    assert "stopped in" not in out  # it failed in clean, it did not stop there unseen
    assert lines[10] == (
        "│ clean  │ failed    │       1 │        - │     - │       - │    1 │            1 │     8 │ 1 stage, 4 tasks │"
    )
    assert "  clean: failed in attempt 1: Py4JJavaError: An error occurred while calling o99.save." in lines
    assert "│ 1       │ failed  │ 1    │ 2026-11-22 03:00:01 │" in out
    assert lines[-2:] == [
        "last error: Py4JJavaError: An error occurred while calling o99.save.",
        "what resume would do now: sparkrecover resume nightly --root <tmp>/root --dry-run",
    ]


def test_killed_attempt_shows_its_signal(cli, tmp_path):
    journals.SyntheticRun(tmp_path / "root").attempt().done("orders").end(137, signal=9)
    _code, out, _ = inspect(cli, tmp_path, "nightly", "--json")
    attempt = orjson.loads(out)["attempts"][0]
    assert (attempt["outcome"], attempt["exit_code"], attempt["signal"], attempt["signal_name"]) == (
        "crashed",
        137,
        9,
        "SIGKILL",
    )
    _code, out, _err = inspect(cli, tmp_path, "nightly")
    assert "│ 1       │ crashed │ 137 (SIGKILL) │" in out


def test_json_carries_what_the_tables_show(cli, tmp_path):
    journals.resumed_run(tmp_path / "root")
    code, out, err = inspect(cli, tmp_path, "nightly", "--json")
    assert (code, err) == (0, "")
    details = orjson.loads(out)
    assert {k: details[k] for k in ("run", "status", "duration_s", "busy_s", "stopped_in", "last_error")} == {
        "run": "nightly",
        "status": "succeeded",
        "duration_s": 14.0,
        "busy_s": 13.0,
        "stopped_in": [],
        "last_error": None,
    }
    assert details["root"] == str(tmp_path / "root")
    daily = details["stages"][2]
    assert daily == {
        "stage": "daily",
        "kind": "checkpoint",
        "status": "committed",
        "attempt": 2,
        "duration_s": 2.0,
        "rows": 30,
        "bytes": 3072,
        "files": 2,
        "spark_jobs": 2,
        "spark_stages": 2,
        "failed_spark_stages": 0,
        "tasks": 6,
        "failed_tasks": 1,
        "partitions": None,
        "reason": None,
        "error": None,
        "skipped": None,
        "invalidated": None,
    }
    assert details["stages"][0]["skipped"] == {"attempt": 2, "reason": "committed in attempt 1, output verified"}
    assert [(a["attempt"], a["outcome"], a["plan"], a["duration_s"]) for a in details["attempts"]] == [
        (1, "crashed", None, 7.5),
        (2, "succeeded", {"skip": 2, "run": 1}, 5.5),
    ]


def test_runs_newest_first(cli, tmp_path):
    root = tmp_path / "root"
    journals.crashed_run(root)
    later = journals.Clock()
    later.tick(3600)
    journals.SyntheticRun(root, "hourly", clock=later).attempt().done("orders").end(0)
    code, out, err = cli("inspect", "--root", str(root))
    assert (code, err) == (0, "")
    assert (
        screen(out, tmp_path)
        == """\
runs under <tmp>/root
┏━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┓
┃ run     ┃ app    ┃ status    ┃ attempts ┃ stages ┃ last activity (UTC) ┃ duration ┃
┡━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━┩
│ hourly  │ etl.py │ succeeded │ 1        │ 1/1    │ 2026-11-22 04:00:05 │ 4.5s     │
│ nightly │ etl.py │ crashed   │ 1        │ 2/3    │ 2026-11-22 03:00:08 │ 8.0s     │
└─────────┴────────┴───────────┴──────────┴────────┴─────────────────────┴──────────┘
"""
    )
    rows = orjson.loads(cli("inspect", "--root", str(root), "--json")[1])["runs"]
    assert [(r["run"], r["status"], r["stages_committed"], r["stages"]) for r in rows] == [
        ("hourly", "succeeded", 1, 1),
        ("nightly", "crashed", 2, 3),
    ]


def test_a_corrupt_run_is_listed_as_unreadable_and_inspect_exits_3(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    path = os.path.join(run.dir, "journal", "0001-driver-000000.jsonl")
    lines = open(path, "rb").read().split(b"\n")
    lines[2] = b'{"v": 1, "type": "spark.job.st'
    with open(path, "wb") as handle:
        handle.write(b"\n".join(lines))
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, out, err) == (
        3,
        "",
        "error: <tmp>/root/nightly/journal/0001-driver-000000.jsonl:3: malformed journal line. "
        "The journal of run nightly is damaged: 'sparkrecover replay nightly --root <tmp>/root "
        "--verify' lists every damaged line; 'sparkrecover resume nightly --root <tmp>/root --from-scratch' sets the "
        "damaged segments aside (in journal.damaged/) and runs "
        "every stage again\n",
    )
    code, out, err = inspect(cli, tmp_path)
    assert code == 0
    assert "│ nightly │ -   │ unreadable │ -        │ -      │ -                   │ -        │" in out
    assert "  nightly: <tmp>/root/nightly/journal/0001-driver-000000.jsonl:3: malformed journal line. " in out
    code, out, err = inspect(cli, tmp_path, "--json")
    assert orjson.loads(out)["runs"][0]["status"] == "unreadable"


def test_empty_root(cli, tmp_path):
    (tmp_path / "root").mkdir()
    assert inspect(cli, tmp_path) == (0, "no runs under <tmp>/root\n", "")
    code, out, err = inspect(cli, tmp_path, "--json")
    assert (code, orjson.loads(out), err) == (0, {"root": str(tmp_path / "root"), "runs": []}, "")


def test_narrow_terminal_keeps_the_columns_that_matter(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    journals.crashed_run(tmp_path / "root")
    _code, out, _err = inspect(cli, tmp_path, "nightly")
    assert "┃ stage  ┃ status     ┃ attempt ┃ duration ┃ written ┃ tasks ┃ failures ┃" in out
    assert "│ daily  │ unfinished │       1 │        - │       - │     4 │ 1 task   │" in out
    # messages are never cut: a terminal wraps them, a log keeps them whole for grep
    assert "what resume would do now: sparkrecover resume nightly --root <tmp>/root --dry-run\n" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--follow"], "error: --follow needs a RUN to follow\n"),
        (["nope"], "error: no run 'nope' at <tmp>/root/nope\n"),
        (["nope", "--follow"], "error: no run 'nope' at <tmp>/root/nope\n"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(cli, tmp_path, args, message):
    code, out, err = inspect(cli, tmp_path, *args)
    assert (code, out, err) == (2 if "--follow needs" in message else 5, "", message)


def test_on_a_pipe_tables_keep_every_column_and_whole_names(cli, tmp_path, monkeypatch):
    """stderr is no terminal and COLUMNS is unset (a pipe, a CI log): rich would squeeze every
    table into 80 columns; sparkrecover prints them at their natural width instead, but for a
    stage name past 40 characters, which wraps inside its cell (docs/cli-output.md)."""
    monkeypatch.delenv("COLUMNS")
    stage = "enrich_customer_orders_with_the_loyalty_programme_tiers_of_2026"
    run_id = "nightly-enrichment-of-customer-orders-for-the-loyalty-programme-2026-11-21"
    journals.SyntheticRun(tmp_path / "root", run_id).attempt().done("orders").started(stage, ("orders",)).end(1)
    for command in (["inspect", run_id], ["inspect"], ["resume", run_id, "--dry-run"]):
        code, out, err = on_screen(cli, tmp_path, *command)
        assert code == 0, err
        rows = [line for line in out.splitlines() if line.startswith("│")]
        assert rows, out
        cells = [row.split("│")[1].strip() for row in rows]
        joined = [a + b for a, b in zip(cells, [*cells[1:], ""], strict=True)]  # a name and its next line
        assert stage in joined or any(f"│ {run_id} " in row for row in rows), out
        # Only the stage column wraps: every other cell of a continuation line is empty.
        wrapped_only = (
            cell or all(not c.strip() for c in row.split("│")[2:]) for cell, row in zip(cells, rows, strict=True)
        )
        assert all(wrapped_only), out
    code, out, _ = on_screen(cli, tmp_path, "inspect", run_id)
    header = next(line for line in out.splitlines() if line.startswith("┃ stage"))
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == [
        "stage",
        "status",
        "attempt",
        "duration",
        "rows",
        "written",
        "jobs",
        "spark stages",
        "tasks",
        "failures",
    ]


def test_a_succeeded_run_claims_no_kept_shuffle_files_for_an_empty_keep_folder(cli, tmp_path):
    """An empty ``<run>/shuffles`` (what spark-submit-args made on every call before) is no kept
    file; a succeeded run keeps none, and what is left there after it is said as left over."""
    journals.clean_run(tmp_path / "root")
    keep = tmp_path / "root" / "nightly" / "shuffles"
    keep.mkdir()
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert (code, err) == (0, "")
    assert "shuffle files" not in out
    (keep / "abc").mkdir()
    (keep / "abc" / "data").write_bytes(b"x" * 2048)
    code, out, err = inspect(cli, tmp_path, "nightly")
    assert "kept shuffle files" not in out and "removed when the run succeeds" not in out
    assert "shuffle files left after the run succeeded: 2.0 KiB in <tmp>/root/nightly/shuffles" in out
