"""RunState, the planner and the commands built on them, on synthetic journals (no Spark)."""
from __future__ import annotations

import os

import orjson
import pytest

from sparkrecover.core import planner
from sparkrecover.core.runstate import RunState
from sparkrecover.errors import UsageError
from sparkrecover.journal import JournalWriter, read_journal
from sparkrecover.rundir import manifests

# Ten bytes with Parquet's magic at both ends, so footer checks pass on untouched files.
PARQUET_LIKE = b"PAR1xxPAR1"


def make_output(path, files=None, success=True) -> str:
    """A folder like Spark writes: part files and, unless told otherwise, _SUCCESS."""
    os.makedirs(path, exist_ok=True)
    for name, data in (files or {"part-00000.parquet": PARQUET_LIKE}).items():
        with open(os.path.join(path, name), "wb") as handle:
            handle.write(data)
    if success:
        open(os.path.join(path, "_SUCCESS"), "wb").close()
    return str(path)


class Run:
    """A run directory with a journal written by a real JournalWriter, one attempt at a time."""

    def __init__(self, root, run_id="r1"):
        self.run_id = run_id
        self.dir = os.path.join(str(root), run_id)
        self.outputs: dict[str, str] = {}
        self.attempt = 0
        self.cli = self.driver = None

    def start_attempt(self, app="app.py"):
        self.attempt += 1
        self.cli = JournalWriter(self.dir, self.run_id, self.attempt, "cli", flush_interval=0)
        self.driver = JournalWriter(self.dir, self.run_id, self.attempt, "driver", flush_interval=0)
        if self.attempt == 1:
            self.cli.emit("run.started", app=app, app_args=[], spark_submit_args=["--master", "local[2]"])
        self.cli.emit("attempt.started", pid=1)
        return self

    def started(self, stage, upstream=(), output=True):
        if output:
            self.outputs[stage] = os.path.join(os.path.dirname(self.dir), "data", stage)
        outputs = [self.outputs[stage]] if stage in self.outputs else []
        self.driver.emit("stage.started", stage=stage, kind="stage", outputs=outputs, upstream=list(upstream),
                         fingerprint={"version": None})
        return self

    def committed(self, stage, upstream=(), files=None, checksums=False):
        manifest = []
        if stage in self.outputs:
            make_output(self.outputs[stage], files)
            manifest = [manifests.build_output(self.outputs[stage], checksums=checksums)]
        manifest, ref, digest = manifests.externalize(stage, manifest, self.dir)
        self.driver.emit("stage.committed", stage=stage, manifest=manifest, manifest_ref=ref,
                         manifest_sha256=digest, upstream=list(upstream), duration_s=1.0)
        return self

    def done(self, stage, upstream=(), files=None):
        return self.started(stage, upstream).committed(stage, upstream, files)

    def failed(self, stage, error):
        self.driver.emit("stage.failed", stage=stage, error=error, error_type="RuntimeError")
        return self

    def end(self, exit_code=1, signal=None):
        self.driver.emit("driver.ended", exit_code=exit_code)
        self.cli.emit("attempt.ended", exit_code=exit_code, signal=signal)
        self.driver.close()
        self.cli.close()
        return self

    def state(self) -> RunState:
        return RunState.from_events(self.run_id, read_journal(self.dir))

    def plan(self, **options) -> dict[str, tuple[str, str]]:
        decisions = planner.make_plan(self.state(), planner.verifier_for(self.dir), **options)
        return {d.stage: (d.decision, d.reason) for d in decisions}


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path / "root").start_attempt()


def test_committed_and_intact_is_skipped(run):
    run.done("a").end(0)
    assert run.plan() == {"a": ("skip", "committed in attempt 1, output verified")}


def test_started_but_not_committed_runs(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    assert run.plan()["b"] == ("run", "started in attempt 1 but not committed")


def test_failed_stage_runs_with_its_error(run):
    run.done("a").started("b", ["a"]).failed("b", "Py4JJavaError: boom\n  at line 2").end(1)
    assert run.plan() == {"a": ("skip", "committed in attempt 1, output verified"),
                          "b": ("run", "failed in attempt 1: Py4JJavaError: boom")}


def test_lost_output_that_nothing_needs_is_reported_not_rerun(run):
    run.done("a").done("b").end(0)
    os.remove(os.path.join(run.outputs["a"], "part-00000.parquet"))
    decision, reason = run.plan()["a"]
    assert decision == "lost"
    assert reason == f"output lost: {run.outputs['a']}/part-00000.parquet is missing"
    assert run.plan()["b"][0] == "skip"


def test_gone_output_folder_is_lost(run):
    run.done("a").end(0)
    for name in os.listdir(run.outputs["a"]):
        os.remove(os.path.join(run.outputs["a"], name))
    os.rmdir(run.outputs["a"])
    assert run.plan()["a"] == ("lost", f"output lost: {run.outputs['a']} is gone")


def test_lost_output_needed_by_a_running_stage_is_rerun(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    os.remove(os.path.join(run.outputs["a"], "part-00000.parquet"))
    decision, reason = run.plan()["a"]
    assert decision == "rerun"
    assert reason.endswith("; needed by b") and "part-00000.parquet is missing" in reason


def test_everything_downstream_of_a_rerun_reruns_transitively(run):
    # a (lost) <- b (runs); a <- e; b <- c <- d; f is independent
    run.done("a").started("b", ["a"]).done("e", ["a"]).done("f")
    run.driver.emit("stage.started", stage="c", upstream=["b"], outputs=[])  # reached in an earlier pass
    run.committed("c", ["b"]).done("d", ["c"]).end(137, 9)
    os.remove(os.path.join(run.outputs["a"], "_SUCCESS"))
    assert run.plan() == {
        "a": ("rerun", f"output lost: {run.outputs['a']}/_SUCCESS is missing; needed by b"),
        "b": ("run", "started in attempt 1 but not committed"),
        "e": ("rerun", "upstream a runs again"),
        "f": ("skip", "committed in attempt 1, output verified"),
        "c": ("rerun", "upstream b runs again"),
        "d": ("rerun", "upstream c runs again"),
    }


def test_a_lost_stage_upstream_of_a_lost_needed_stage_is_rebuilt_too(run):
    run.done("a").done("b", ["a"]).started("c", ["b"]).end(1)
    for stage in ("a", "b"):
        os.remove(os.path.join(run.outputs[stage], "part-00000.parquet"))
    plan = run.plan()
    assert plan["b"][0] == "rerun" and plan["b"][1].endswith("needed by c")
    assert plan["a"][0] == "rerun" and plan["a"][1].endswith("needed by b")


@pytest.mark.parametrize("damage, problem", [
    ("grow", "part-00000.parquet changed size (10 -> 13 bytes)"),
    ("extra", "part-00001.parquet is new"),
    ("no-success", "_SUCCESS is missing"),
])
def test_changed_outputs_are_not_skipped(run, damage, problem):
    run.done("a").started("b", ["a"]).done("c").end(1)
    for stage in ("a", "c"):
        folder = run.outputs[stage]
        if damage == "grow":
            with open(os.path.join(folder, "part-00000.parquet"), "ab") as handle:
                handle.write(b"abc")
        elif damage == "extra":
            make_output(folder, {"part-00001.parquet": b"x"})
        else:
            os.remove(os.path.join(folder, "_SUCCESS"))
    plan = run.plan()
    assert plan["a"] == ("rerun", f"output lost: {run.outputs['a']}/{problem}; needed by b")
    assert plan["c"] == ("lost", f"output lost: {run.outputs['c']}/{problem}")


def test_hidden_and_bookkeeping_files_do_not_count(run):
    run.done("a").end(0)
    make_output(run.outputs["a"], {".part-00000.parquet.crc": b"crc", "_committed_123": b"x"})
    os.makedirs(os.path.join(run.outputs["a"], "_temporary", "0"))
    assert run.plan()["a"][0] == "skip"


def test_rerun_and_from_scratch(run):
    run.done("a").done("b", ["a"]).done("c").started("d", ["c"]).end(1)
    assert run.plan(rerun=["a"]) == {
        "a": ("rerun", "--rerun"), "b": ("rerun", "upstream a runs again"),
        "c": ("skip", "committed in attempt 1, output verified"),
        "d": ("run", "started in attempt 1 but not committed")}
    assert run.plan(from_scratch=True) == {
        "a": ("rerun", "--from-scratch"), "b": ("rerun", "--from-scratch"), "c": ("rerun", "--from-scratch"),
        "d": ("run", "started in attempt 1 but not committed")}


def test_rerun_of_an_unknown_stage_is_a_usage_error(run):
    run.done("a").end(0)
    with pytest.raises(UsageError, match="nope") as caught:
        run.plan(rerun=["a", "nope"])
    assert caught.value.exit_code == 2


def test_plan_follows_pipeline_order(run):
    run.started("z").started("m").started("a")
    run.committed("a").committed("z").committed("m").end(0)
    assert list(run.plan()) == ["z", "m", "a"]
    assert list(run.state().stages) == ["z", "m", "a"]


def test_a_resumed_attempt_keeps_the_first_order_and_sees_its_commits(run):
    run.done("a").started("b", ["a"]).end(137, 9)
    run.start_attempt()
    run.driver.emit("stage.skipped", stage="a", reason="committed in attempt 1, output verified")
    run.done("b", ["a"]).done("c", ["b"]).end(0)
    assert run.plan() == {"a": ("skip", "committed in attempt 1, output verified"),
                          "b": ("skip", "committed in attempt 2, output verified"),
                          "c": ("skip", "committed in attempt 2, output verified")}


# -- large manifests ------------------------------------------------------------------------------

def test_large_manifests_go_to_a_file_and_are_verified_through_it(run):
    files = {f"part-{i:05d}.parquet": b"x" for i in range(manifests.INLINE_FILE_LIMIT + 1)}
    run.done("big", files=files).done("small").end(0)
    committed = run.state().stages["big"].committed
    assert committed["manifest_ref"] == "manifests/big.json"
    assert "files" not in committed["manifest"][0]
    assert committed["manifest"][0]["file_count"] == manifests.INLINE_FILE_LIMIT + 1
    assert run.state().stages["small"].committed["manifest_ref"] is None
    stored = orjson.loads(open(os.path.join(run.dir, "manifests", "big.json"), "rb").read())
    assert stored["stage"] == "big" and len(stored["outputs"][0]["files"]) == manifests.INLINE_FILE_LIMIT + 1
    assert run.plan()["big"][0] == "skip"
    os.remove(os.path.join(run.outputs["big"], "part-00500.parquet"))
    assert run.plan()["big"] == ("lost", f"output lost: {run.outputs['big']}/part-00500.parquet is missing")


def test_exactly_inline_file_limit_files_stay_inline(tmp_path):
    folder = make_output(tmp_path / "out", {f"p{i}": b"" for i in range(manifests.INLINE_FILE_LIMIT)})
    manifest = [manifests.build_output(folder)]
    assert manifests.externalize("s", manifest, str(tmp_path / "run")) == (manifest, None, None)


@pytest.mark.parametrize("tamper", ["rewrite", "delete"])
def test_a_rewritten_or_missing_manifest_file_is_not_skippable(run, tamper):
    files = {f"part-{i:05d}": b"x" for i in range(manifests.INLINE_FILE_LIMIT + 1)}
    run.done("big", files=files).end(0)
    path = os.path.join(run.dir, "manifests", "big.json")
    if tamper == "rewrite":  # a later, unfinished attempt rewrote it: same files, other bytes
        document = orjson.loads(open(path, "rb").read())
        with open(path, "wb") as handle:
            handle.write(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    else:
        os.remove(path)
    assert run.plan()["big"] == ("lost", "output lost: the manifest recorded for big is missing or was rewritten")


def test_restore_output_removes_what_appeared_after_before(tmp_path):
    folder = make_output(tmp_path / "out", {"part-0": b"old"}, success=False)
    before = manifests.build_output(folder)
    make_output(folder, {"part-1": b"new"}, success=True)
    removed = manifests.restore_output(before)
    assert removed == [os.path.join(folder, "part-1")]
    assert sorted(os.listdir(folder)) == ["part-0"]
    assert manifests.restore_output(manifests.build_output(str(tmp_path / "absent"))) == []


# -- RunState -------------------------------------------------------------------------------------

def event(type_, seq, attempt=1, writer="cli", **payload):
    return {"v": 1, "type": type_, "run": "r1", "attempt": attempt, "writer": writer, "seq": seq,
            "ts": f"2026-01-01T00:00:{seq:02d}.000Z", **payload}


@pytest.mark.parametrize("ended, outcome", [
    ({"exit_code": 0, "signal": None}, "succeeded"),
    ({"exit_code": 1, "signal": None}, "failed"),
    ({"exit_code": 137, "signal": 9}, "failed"),
    ({"exit_code": 130, "signal": 2}, "interrupted"),
    ({"exit_code": 143, "signal": 15}, "interrupted"),
    (None, "crashed"),
])
def test_attempt_outcomes(ended, outcome):
    records = [event("run.started", 0, app="app.py"), event("attempt.started", 1)]
    if ended is not None:
        records.append(event("attempt.ended", 2, **ended))
    state = RunState.from_events("r1", records)
    attempt = state.attempts[1]
    assert attempt.outcome == outcome
    assert (attempt.exit_code, attempt.signal) == ((ended or {}).get("exit_code"), (ended or {}).get("signal"))
    assert state.status() == outcome
    assert state.succeeded is (outcome == "succeeded")
    assert state.status(lease_live=True) == ("running" if ended is None else outcome)


def test_the_last_attempt_decides_the_run_status():
    state = RunState.from_events("r1", [
        event("attempt.started", 0), event("attempt.ended", 1, exit_code=137, signal=9),
        event("attempt.started", 2, attempt=2), event("attempt.ended", 3, attempt=2, exit_code=0)])
    assert [a.outcome for a in state.attempts.values()] == ["failed", "succeeded"]
    assert state.status() == "succeeded" and state.last_attempt.number == 2


def test_unknown_event_types_are_counted_not_fatal():
    state = RunState.from_events("r1", [
        event("run.started", 0, app="app.py"), event("attempt.started", 1),
        event("stage.started", 2, writer="driver", stage="a", upstream=[]),
        event("spark.task.speculated", 3, writer="driver", stage="a"),
        event("something.new", 4, writer="driver", payload={"x": 1}),
        event("stage.committed", 5, writer="driver", stage="a", manifest=[]),
        event("attempt.ended", 6, exit_code=0)])
    assert (state.other_events, state.event_count) == (2, 7)
    assert list(state.stages) == ["a"] and state.stages["a"].status == "committed"
    assert state.status() == "succeeded"
    assert (state.first_ts, state.last_ts) == ("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:06.000Z")


# -- the commands on a synthetic run ---------------------------------------------------------------

def journal_files(run_dir):
    return sorted(os.listdir(os.path.join(run_dir, "journal")))


def test_resume_dry_run_json_shape(run, cli, tmp_path):
    run.done("a").started("b", ["a"]).end(137, 9)
    files = journal_files(run.dir)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json")
    assert code == 0, err
    assert orjson.loads(out) == {"run": "r1", "attempt": 2, "stages": [
        {"stage": "a", "decision": "skip", "reason": "committed in attempt 1, output verified"},
        {"stage": "b", "decision": "run", "reason": "started in attempt 1 but not committed"}]}
    # a dry run launches nothing: no new attempt, no plan, no lease
    assert journal_files(run.dir) == files
    assert sorted(os.listdir(run.dir)) == ["journal"]


def test_resume_dry_run_of_a_run_directory_url(run, cli):
    run.done("a").end(1)
    code, out, _ = cli("resume", run.dir, "--dry-run", "--json")
    assert code == 0
    assert orjson.loads(out)["stages"] == [
        {"stage": "a", "decision": "skip", "reason": "committed in attempt 1, output verified"}]


@pytest.mark.parametrize("level", ["footer", "checksum"])
def test_resume_accepts_every_verify_level_of_the_design(run, cli, tmp_path, level):
    run.done("a").started("b", ["a"]).end(1)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json",
                         "--verify", level)
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
        "run": "r1", "run_dir": run.dir, "app": "app.py", "status": "failed", "events": 7,
        "journal_degraded": 0, "lease": None}
    assert [(a["attempt"], a["outcome"], a["exit_code"], a["resumed"]) for a in details["attempts"]] == [
        (1, "failed", 1, False)]
    assert [(s["stage"], s["status"], s["files"], s["bytes"]) for s in details["stages"]] == [
        ("a", "committed", 1, 10), ("b", "unfinished", None, None)]


def test_inspect_without_runs(cli, tmp_path):
    code, out, err = cli("inspect", "--root", str(tmp_path / "empty"), "--json")
    assert (code, orjson.loads(out)) == (0, {"root": str(tmp_path / "empty"), "runs": []})
    code, out, err = cli("inspect")  # the default root, ./.sparkrecover, does not exist either
    assert (code, out) == (0, "")
    assert "no runs" in err


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


def _damage_keeping_size(path: str, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)


@pytest.mark.parametrize("level, damage, found", [
    ("size", b"XXXX", None),
    ("footer", b"XXXX", "has a damaged Parquet header or footer"),
    ("footer", b"PAR1yy", None),
    ("checksum", b"PAR1yy", "changed content (checksum differs)"),
])
def test_verification_levels_see_what_they_promise(tmp_path, level, damage, found):
    output = make_output(tmp_path / "out")
    recorded = manifests.build_output(output, checksums=True)
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), damage)
    problems = manifests.verify_output(recorded, level)
    if found is None:
        assert problems == []
    else:
        assert problems == [f"{output}/part-00000.parquet {found}"]


def test_checksum_level_falls_back_to_footers_without_recorded_digests(tmp_path):
    output = make_output(tmp_path / "out")
    recorded = manifests.build_output(output)
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), b"PAR1yy")
    assert manifests.verify_output(recorded, "checksum") == []
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), b"XXXX")
    assert manifests.verify_output(recorded, "checksum") == [
        f"{output}/part-00000.parquet has a damaged Parquet header or footer"]
