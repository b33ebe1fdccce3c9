"""How inspect, replay and --follow show stages: names, kept partitions, schema facts, killed
drivers (synthetic journals, no Spark; a terminal is a rich Console forced to be one)."""

from __future__ import annotations

import io
import os
import re

import orjson
import pytest
from rich.console import Console

from sparkrecover.cli import follow as following
from sparkrecover.cli import inspect as inspecting
from sparkrecover.cli import render
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.views import watch
from sparkrecover.journal import read_journal
from sparkrecover.planning import reading
from sparkrecover.rundir import lease
from sparkrecover.rundir.runs import Run
from tests import journals


@pytest.fixture
def terminal(monkeypatch):
    """stdout is a 200-column terminal; what it shows is returned by the fixture's getvalue()."""
    monkeypatch.setenv("TERM", "xterm")
    screen = io.StringIO()
    render._report = Console(file=screen, force_terminal=True, width=200, color_system=None)
    return screen


def implicit(tmp_path) -> str:
    return f"etl.py:36#1 overwrite {tmp_path}/out/daily"


def run_with_an_implicit_write(tmp_path):
    run = journals.Run(tmp_path / "root").start_attempt()
    return run.done("clean").started(implicit(tmp_path), ["clean"]).end(137, 9)


# -- stage names: relative to the working folder on a terminal, whole elsewhere ----------------------------


def test_on_a_terminal_targets_are_relative_to_the_working_folder(tmp_path, terminal):
    run_with_an_implicit_write(tmp_path)  # the tests run in tmp_path
    assert inspecting.run(run="r1", root=str(tmp_path / "root"), json_output=False) == 0
    shown = terminal.getvalue()
    assert "│ etl.py:36#1 overwrite out/daily │" in shown
    assert str(tmp_path) + "/out" not in shown


def stage_cells(table: str) -> list[str]:
    """The stage column's cells of a table, each wrapped line of a cell joined again (without the
    blanks the wrapping took: compare with ``unspaced``)."""
    cells: list[str] = []
    for line in table.splitlines():
        if line.startswith("│"):
            text = line.split("│")[1].strip()
            if cells and cells[-1] and text and not line.split("│")[2].strip():
                cells[-1] += text  # a continuation line of a name wrapped inside its cell
            else:
                cells.append(text)
    return [unspaced(cell) for cell in cells]


def unspaced(text: str) -> str:
    return "".join(text.split())


def test_on_a_pipe_and_in_json_names_are_whole(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS")  # a pipe
    run_with_an_implicit_write(tmp_path)
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"))
    assert unspaced(implicit(tmp_path)) in stage_cells(out.split("attempts")[0])
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"), "--json")
    assert [s["stage"] for s in orjson.loads(out)["stages"]] == ["clean", implicit(tmp_path)]


def test_a_long_stage_name_wraps_inside_its_cell_instead_of_widening_the_tables(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS")  # a pipe: tables are not fitted to any width
    long_name = f"nightly.py:24#1 overwrite {tmp_path}/warehouse/orders/daily-summary-2026-11-24"
    run = journals.Run(tmp_path / "root").start_attempt()
    run.done("clean").started(long_name, ["clean"]).end(137, 9)
    for command in (("inspect", "r1"), ("resume", "r1", "--dry-run")):
        _code, out, _err = cli(*command, "--root", str(tmp_path / "root"))
        tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
        assert tables and max(len(line) for line in tables) <= 140, (command, out)
        assert unspaced(long_name) in stage_cells(out.split("attempts")[0]), (command, out)


# -- replay ---------------------------------------------------------------------------------------------


def test_replay_lines_its_facts_up_after_the_longest_stage_name(cli, tmp_path):
    run_with_an_implicit_write(tmp_path)
    _code, out, _ = cli("replay", "r1", "--root", str(tmp_path / "root"))
    started = [line for line in out.splitlines() if "stage.started" in line]
    assert len(started) == 2
    # each fact starts in the same column: after the longest name and two blanks
    column = started[1].index(implicit(tmp_path)) + len(implicit(tmp_path)) + 2
    assert [line[column:] for line in started] == [
        f"stage; writes {tmp_path}/root/data/clean",
        f"stage; writes {tmp_path}/root/data/{implicit(tmp_path)}; reads clean",
    ]


def test_replay_says_what_a_schema_inference_and_its_reuse_were(cli, tmp_path):
    run = journals.Run(tmp_path / "root").start_attempt()
    schema = {
        "type": "struct",
        "fields": [{"name": n, "type": "long", "nullable": True, "metadata": {}} for n in "abc"],
    }
    read = {"key": "etl.py:7 json", "format": "json", "paths": ["/data/raw"], "call_site": "etl.py:7"}
    run.driver.emit("schema.inferred", **read, schema=schema, input_digest="d", input_count=40, duration_s=3.25)
    run.end(1)
    run.start_attempt()
    run.driver.emit("schema.reused", **read, inferred_in=1, input_count=40, duration_s=0.05)
    run.end(0)
    _code, out, _ = cli("replay", "r1", "--root", str(tmp_path / "root"))
    facts = [line.split(" -  ", 1)[1].strip() for line in out.splitlines() if " schema." in line]
    assert facts == [
        "json /data/raw: 3 columns inferred from 40 input files in 3.2s",
        "json /data/raw: schema inferred in attempt 1 reused, 40 input files unchanged, 0.1s",
    ]


# -- inspect of a write that kept partitions --------------------------------------------------------------


def task(run, stage, partition, records):
    run.driver.emit("task.committed", stage=stage, partition=partition, task_attempt=0, records=records, bytes=10)


def write_started(run, kept=()):
    run.driver.emit("write.started", stage="w", partitions=8, shape="s1", reusable=True, reason=None, kept=list(kept))


def killed_inside_the_write(tmp_path):
    run = journals.Run(tmp_path / "root").start_attempt()
    run.started("w")
    write_started(run)
    for partition in (0, 1, 2):
        task(run, "w", partition, 100)
    return run.end(137, 9)


def test_an_unfinished_write_shows_the_partitions_it_committed(cli, tmp_path):
    killed_inside_the_write(tmp_path)
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"), "--json")
    (stage,) = orjson.loads(out)["stages"]
    assert (stage["status"], stage["tasks"], stage["partitions"]) == (
        "unfinished",
        3,
        {"committed": 3, "total": 8, "by_attempt": {"1": 3}},
    )


def test_a_write_that_kept_partitions_counts_the_whole_target_and_says_where_they_came_from(cli, tmp_path):
    run = killed_inside_the_write(tmp_path)
    run.start_attempt()
    run.started("w")
    write_started(run, kept=[0, 1, 2])
    for partition in (0, 1, 2):  # kept: their tasks commit again, empty
        task(run, "w", partition, 0)
    for partition in range(3, 8):
        task(run, "w", partition, 100)
    run.driver.emit(
        "spark.stage.completed", stage="w", spark_stage=1, spark_attempt=0, name="save", tasks=8, failed_tasks=0,
        metrics={"output_records": 500},
    )  # fmt: skip
    run.committed("w").end(0)
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"), "--json")
    (stage,) = orjson.loads(out)["stages"]
    assert (stage["status"], stage["rows"], stage["partitions"]) == (
        "committed",
        800,  # 500 computed in attempt 2 and 300 kept from attempt 1
        {"kept": 3, "computed": 5, "total": 8, "by_attempt": {"1": 3, "2": 5}, "kept_from": {"1": [0, 1, 2]}},
    )
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"))
    assert (
        "  w: 3/8 partitions kept from earlier attempts, 5 computed in attempt 2 (3 in attempt 1, 5 in attempt 2)\n"
        in out
    )


def test_a_write_that_committed_nothing_says_it_runs_whole(cli, tmp_path):
    run = journals.Run(tmp_path / "root").start_attempt()
    run.started("w")
    write_started(run)
    run.end(137, 9)
    _code, out, _ = cli("inspect", "r1", "--root", str(tmp_path / "root"))
    assert "  w: none of its 8 partitions committed before it stopped (resume writes it whole)\n" in out
    assert "resume keeps them" not in out


# -- one name for a killed driver --------------------------------------------------------------------------


def test_a_killed_driver_is_crashed_whether_or_not_its_cli_survived(cli, tmp_path):
    journals.SyntheticRun(tmp_path / "root", "survived").attempt().done("orders").end(137, signal=9)
    journals.SyntheticRun(tmp_path / "root", "died").attempt().done("orders").crash()
    rows = orjson.loads(cli("inspect", "--root", str(tmp_path / "root"), "--json")[1])["runs"]
    assert sorted((row["run"], row["status"]) for row in rows) == [("died", "crashed"), ("survived", "crashed")]
    _code, out, _ = cli("inspect", "survived", "--root", str(tmp_path / "root"))
    assert "│ 1       │ crashed │ 137 (SIGKILL) │" in out  # the exit column tells the two apart


# -- --follow -----------------------------------------------------------------------------------------------


def test_the_live_view_shows_whole_names_on_a_wide_terminal(tmp_path, terminal, monkeypatch):
    monkeypatch.setattr(watch, "POLL_INTERVAL", 0.01)
    name = "enrich_customer_orders_with_the_loyalty_programme_tiers"
    journals.SyntheticRun(tmp_path / "root").attempt().done("orders").done(name, ("orders",)).end(0)
    following.until_ended(Run("nightly", str(tmp_path / "root" / "nightly")), quiet=False)
    assert f"  {name}" in terminal.getvalue()


def test_a_resumed_attempts_progress_counts_the_stages_earlier_attempts_recorded(tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"})
    run.skipped("orders", "committed in attempt 1, output verified")
    for writer in (run.cli, run.driver):
        writer.flush()
    state = RunState.from_events("nightly", read_journal(run.dir))
    assert following._headline(state) == "attempt 2, 2/3 stages done"
    first = RunState.from_events("nightly", [r for r in read_journal(run.dir) if r["attempt"] == 1])
    first.attempts[1].exit_code = None  # as seen while attempt 1 still ran
    assert following._headline(first) == "attempt 1, 2 stages done of 3 reached so far"


def test_a_follower_started_just_before_a_resume_follows_the_attempt_that_starts(tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    held: list[lease.Lease] = []

    def resume_starts_meanwhile(_seconds):
        """The follower's sleeps: in the first one a resume takes the lease and starts attempt 2,
        in the next ones attempt 2 runs and ends."""
        if not held:
            held.append(lease.Lease(run.ref).acquire())
            run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"})
            for writer in (run.cli, run.driver):
                writer.flush()
        elif run.cli is not None and not run.cli._closed:
            run.done("daily", ("clean",)).end(0)
            held[0].release()

    updates = list(watch.follow(reading.WatchedRun(run.dir), run.run_id, sleep=resume_starts_meanwhile, interval=0.01))
    assert updates[-1].ended == "attempt 2 ended: succeeded (exit 0)"
    assert updates[-1].state.status() == "succeeded"


def test_a_follower_of_a_dead_run_gives_up_after_its_grace(tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    slept: list[float] = []
    updates = list(watch.follow(reading.WatchedRun(run.dir), run.run_id, sleep=slept.append, interval=0.5, grace=2.0))
    assert updates[-1].ended.startswith("attempt 1 crashed") and sum(slept) == 2.0


# -- attempts a launcher restarted ---------------------------------------------------------------------------


def test_an_attempt_a_launcher_restarted_is_shown_as_such_everywhere(cli, tmp_path):
    """A driver YARN or an orchestrator ran again journals its own attempt.started
    (started_by: launcher); submit's attempt that the cluster continued says so in attempt.ended."""
    from sparkrecover.journal import JournalWriter

    run = journals.SyntheticRun(tmp_path / "root")
    run.attempt().done("orders").started("clean", ("orders",))
    run.driver.close()
    run.cli.emit("attempt.ended", exit_code=None, signal=None, continued_by=2, application_exit_code=0)
    run.cli.close()
    restarted = JournalWriter(Run("nightly", run.dir), 2, "driver", flush_interval=0)
    restarted.emit("attempt.started", pid=77, host="node-2", command=["bootstrap.py"], started_by="launcher")
    restarted.emit("stage.skipped", stage="orders", reason="committed in attempt 1, output verified")
    restarted.emit("driver.ended", exit_code=0, error=None)
    restarted.emit("attempt.ended", exit_code=0, signal=None)
    restarted.close()
    root = str(tmp_path / "root")

    shown = orjson.loads(cli("inspect", "nightly", "--root", root, "--json")[1])
    assert [(a["attempt"], a["outcome"], a["started_by"]) for a in shown["attempts"]] == [
        (1, "crashed", None),
        (2, "succeeded", "launcher"),
    ]
    _code, out, _ = cli("inspect", "nightly", "--root", root)
    assert "│ 2 (restarted by the launcher) │ succeeded │" in out
    _code, out, _ = cli("replay", "nightly", "--root", root)
    assert "restarted by the launcher: driver pid 77 took the next attempt" in out
    page = str(tmp_path / "page.html")
    assert cli("report", "nightly", "--root", root, "-o", page)[0] == 0
    assert "restarted by the launcher · started" in open(page, encoding="utf-8").read()


def test_the_first_attempt_a_launcher_started_is_started_not_restarted(cli, tmp_path):
    """Under a launcher the first driver journals its attempt.started itself too: nothing restarted
    it, and no view may say so."""
    from sparkrecover.journal import JournalWriter

    root = str(tmp_path / "root")
    for attempt, pid in ((1, 76), (2, 77)):
        driver = JournalWriter(Run("nightly", os.path.join(root, "nightly")), attempt, "driver", flush_interval=0)
        driver.emit("attempt.started", pid=pid, host="node-2", command=["bootstrap.py"], started_by="launcher")
        driver.emit("driver.ended", exit_code=1 if attempt == 1 else 0, error=None)
        driver.emit("attempt.ended", exit_code=1 if attempt == 1 else 0, signal=None)
        driver.close()

    _code, out, _ = cli("inspect", "nightly", "--root", root)
    assert re.search(r"│ 1 \(started by the launcher\) +│ failed", out), out
    assert re.search(r"│ 2 \(restarted by the launcher\) │ succeeded", out), out
    _code, out, _ = cli("replay", "nightly", "--root", root)
    assert "started by the launcher: driver pid 76 took attempt 1" in out
    assert "restarted by the launcher: driver pid 77 took the next attempt" in out
    page = str(tmp_path / "page.html")
    assert cli("report", "nightly", "--root", root, "-o", page)[0] == 0
    html = open(page, encoding="utf-8").read()
    assert html.count("restarted by the launcher · started") == 1 and "started by the launcher · started" in html
