"""resume --dry-run and inspect --json on a synthetic run (no Spark): shapes, verify levels, exit codes."""

from __future__ import annotations

import os

import orjson
import pytest


def journal_files(run_dir):
    return sorted(os.listdir(os.path.join(run_dir, "journal")))


def test_resume_dry_run_json_shape(run, cli, tmp_path):
    run.done("a").started("b", ["a"]).end(137, 9)
    files = journal_files(run.dir)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json")
    assert code == 0, err
    assert orjson.loads(out) == {
        "run": "r1",
        "attempt": 2,
        "stages": [
            {"stage": "a", "decision": "skip", "reason": "committed in attempt 1, output verified"},
            {"stage": "b", "decision": "run", "reason": "started in attempt 1 but not committed"},
        ],
        "schemas": [],
        "shuffles": [],
        "actions": [],
        "shuffles_not_kept": [],
    }
    # a dry run launches nothing: no new attempt, no plan, no lease
    assert journal_files(run.dir) == files
    assert sorted(os.listdir(run.dir)) == ["journal"]


def test_resume_dry_run_of_a_run_directory_url(run, cli):
    run.done("a").end(1)
    code, out, _ = cli("resume", run.dir, "--dry-run", "--json")
    assert code == 0
    assert orjson.loads(out)["stages"] == [
        {"stage": "a", "decision": "skip", "reason": "committed in attempt 1, output verified"}
    ]


@pytest.mark.parametrize("level", ["footer", "checksum"])
def test_resume_accepts_every_verify_level_of_the_design(run, cli, tmp_path, level):
    run.done("a").started("b", ["a"]).end(1)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json", "--verify", level)
    assert code == 0, err
    assert [s["decision"] for s in orjson.loads(out)["stages"]] == ["skip", "run"]


def test_bad_verify_value_is_a_usage_error(run, cli, tmp_path):
    run.done("a").end(1)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--verify", "bogus")
    assert (code, out) == (2, "")
    assert "--verify bogus" in err and "Traceback" not in err


def test_inspect_json(run, cli, tmp_path):
    run.done("a").started("b", ["a"]).end(1)
    code, out, err = cli("inspect", "r1", "--root", str(tmp_path / "root"), "--json")
    assert code == 0, err
    details = orjson.loads(out)
    assert {k: details[k] for k in ("run", "run_dir", "app", "status", "events", "journal_degraded", "lease")} == {
        "run": "r1",
        "run_dir": run.dir,
        "app": "app.py",
        "status": "failed",
        "events": 7,
        "journal_degraded": 0,
        "lease": None,
    }
    assert [(a["attempt"], a["outcome"], a["exit_code"], a["resumed"]) for a in details["attempts"]] == [
        (1, "failed", 1, False)
    ]
    assert [(s["stage"], s["status"], s["files"], s["bytes"]) for s in details["stages"]] == [
        ("a", "committed", 1, 10),
        ("b", "unfinished", None, None),
    ]


def test_inspect_without_runs(cli, tmp_path):
    os.makedirs(tmp_path / "empty")
    code, out, err = cli("inspect", "--root", str(tmp_path / "empty"), "--json")
    assert (code, orjson.loads(out)) == (0, {"root": str(tmp_path / "empty"), "runs": []})
    code, out, err = cli("inspect")  # the default root, ./.sparkrecover, does not exist: no run yet
    assert (code, err) == (0, "")
    assert "no runs" in out


@pytest.mark.parametrize("command", [["inspect", "nope"], ["resume", "nope", "--dry-run"], ["resume", "nope"]])
def test_unknown_run_exits_5(cli, tmp_path, command):
    code, out, err = cli(*command, "--root", str(tmp_path / "root"))
    assert (code, out) == (5, "")
    assert "nope" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["inspect", "r1"], ["resume", "r1", "--dry-run"], ["resume", "r1"]])
def test_corrupt_journal_exits_3_and_says_where(run, cli, tmp_path, command):
    run.done("a").started("b", ["a"]).end(1)
    path = os.path.join(run.dir, "journal", "0001-driver-000000.jsonl")
    lines = open(path, "rb").read().split(b"\n")
    lines[1] = b'{"v": 1, "type": "stage.comm'
    with open(path, "wb") as handle:
        handle.write(b"\n".join(lines))
    code, out, err = cli(*command, "--root", str(tmp_path / "root"))
    assert (code, out) == (3, "")
    assert f"{path}:2: malformed journal line" in " ".join(err.split())
    assert "Traceback" not in err


def test_inspect_shows_map_progress_per_shuffle_and_the_disk_kept_files_hold(run, cli, tmp_path):
    run.started("b")
    run.driver.emit("shuffle.registered", stage="b", shuffle="f" * 32, spark_shuffle=0, maps=4, reduces=2, reused=0)
    entry = {
        "map": 1,
        "path": f"{'f' * 32}/map-1",
        "data_bytes": 1000,
        "index_bytes": 24,
        "records": 5,
        "row_bytes": 80,
        "keep_us": 3000,
        "copy_us": 1_500_000,
    }
    run.driver.emit("shuffle.committed", stage="b", shuffle="f" * 32, spark_shuffle=0, maps=[entry])
    run.driver.emit("shuffle.unsupported", stage="b", spark_shuffle=1, reason="the map stage is INDETERMINATE")
    run.end(137, 9)
    kept = os.path.join(run.dir, "shuffles", "f" * 32, "map-1")
    os.makedirs(kept)
    with open(os.path.join(kept, "data"), "wb") as handle:
        handle.write(b"x" * 1000)
    code, out, err = cli("inspect", "r1", "--root", str(tmp_path / "root"), "--json")
    assert code == 0, err
    details = orjson.loads(out)
    assert [(s["kept"], s["maps"], s["stage"]) for s in details["shuffles"]] == [(1, 4, "b")]
    assert details["shuffle_bytes"] == 1000
    assert details["shuffle_folder"] == os.path.join(run.dir, "shuffles")
    assert [(s["keep_seconds"], s["copy_seconds"]) for s in details["shuffles"]] == [(0.003, 1.5)]
    assert details["shuffles_unsupported"][0]["reason"] == "the map stage is INDETERMINATE"
    from tests.helpers import run_cli

    result = run_cli("inspect", "r1", "--root", str(tmp_path / "root"))
    shown = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr
    assert f"shuffle {'f' * 12}  1/4 map outputs kept  in b" in shown
    assert (
        f"kept shuffle files: 1000 B in {os.path.join(run.dir, 'shuffles')} (removed when the run succeeds); "
        "keeping took 3 ms of map tasks' time and 1.5s of background copying"
    ) in " ".join(shown.split())
    assert "map outputs not kept (attempt 1, Spark shuffle 1 in b): the map stage is INDETERMINATE" in shown


def test_inspect_of_a_succeeded_run_says_its_kept_map_outputs_were_removed(run, cli, tmp_path):
    run.started("b")
    run.driver.emit("shuffle.registered", stage="b", shuffle="f" * 32, spark_shuffle=0, maps=2, reduces=2, reused=0)
    entries = [
        {"map": i, "path": f"{'f' * 32}/map-{i}", "data_bytes": 10, "index_bytes": 24, "records": 1, "row_bytes": 8}
        for i in (0, 1)
    ]
    run.driver.emit("shuffle.committed", stage="b", shuffle="f" * 32, spark_shuffle=0, maps=entries)
    for spark_shuffle in (3, 5, 7):  # one reason, three shuffles: said once
        run.driver.emit("shuffle.unsupported", stage="b", spark_shuffle=spark_shuffle, reason="it reads a JDBC table")
    run.committed("b").end(0)  # succeeded: the keep folder was removed (there is none here)
    from tests.helpers import run_cli

    result = run_cli("inspect", "r1", "--root", str(tmp_path / "root"))
    assert result.returncode == 0, result.stderr
    assert f"shuffle {'f' * 12}  2/2 map outputs were kept, since removed  in b" in result.stdout
    assert "kept shuffle files" not in result.stdout
    refused = [line for line in result.stdout.splitlines() if "map outputs not kept" in line]
    assert refused == ["  map outputs not kept (attempt 1, Spark shuffles 3, 5, 7 in b): it reads a JDBC table"]
