"""Plans, lease.json and manifests carry a format version; an unknown one is refused (exit 3)."""

from __future__ import annotations

import os

import orjson
import pytest

from sparkrecover.errors import FormatError
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import manifests, plans
from sparkrecover.rundir.runs import Run
from tests import journals


def test_a_plan_is_written_with_its_version_and_read_back(tmp_path):
    raw = plans.encode(plans.Plan("r", 2))
    assert orjson.loads(raw)["v"] == 1
    assert plans.read_plan(raw, "0002.json") == plans.Plan("r", 2)


@pytest.mark.parametrize(
    "version, message",
    [
        (2, "plan written in format v2; this sparkrecover reads v1: upgrade sparkrecover to read it"),
        ("one", "unknown plan format version 'one'"),
    ],
)
def test_a_plan_of_an_unknown_version_is_refused(tmp_path, version, message):
    path = tmp_path / "0002.json"
    path.write_bytes(orjson.dumps({"v": version, "stages": []}))
    with pytest.raises(FormatError) as caught:
        plans.read_plan(path.read_bytes(), str(path))
    assert str(caught.value) == f"{path}: {message}" and caught.value.exit_code == 3


def test_a_plan_without_a_version_predates_versions_and_is_read(tmp_path):
    path = tmp_path / "0002.json"
    path.write_bytes(orjson.dumps({"run": "r", "attempt": 2, "stages": []}))
    assert plans.read_plan(path.read_bytes(), str(path)).run == "r"


def test_the_lease_carries_its_version_and_an_unknown_one_is_refused(tmp_path):
    run_dir = str(tmp_path / "run")
    held = leases.Lease(Run("r", run_dir)).acquire()
    try:
        assert leases.read_lease(run_dir)["v"] == 1
    finally:
        held.release()
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps({"v": 7, "run": "r", "pid": 1}))
    with pytest.raises(FormatError, match="lease written in format v7"):
        leases.read_lease(run_dir)


def test_inspect_refuses_a_run_whose_lease_is_of_a_newer_format(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    with open(os.path.join(run.dir, "lease.json"), "wb") as handle:
        handle.write(orjson.dumps({"v": 2, "run": "nightly"}))
    code, out, err = cli("inspect", "nightly", "--root", str(tmp_path / "root"))
    assert (code, out) == (3, "")
    assert "lease written in format v2; this sparkrecover reads v1" in " ".join(err.split())


def test_an_externalized_manifest_carries_its_version_and_an_unknown_one_is_refused(tmp_path):
    run_dir = str(tmp_path / "run")
    many = [
        {
            "path": "/data/x",
            "files": [[f"part-{i}", 1] for i in range(manifests.INLINE_FILE_LIMIT + 1)],
            "file_count": manifests.INLINE_FILE_LIMIT + 1,
            "bytes": manifests.INLINE_FILE_LIMIT + 1,
        }
    ]
    summary, ref, digest = manifests.externalize("s", many, run_dir)
    committed = {"manifest": summary, "manifest_ref": ref, "manifest_sha256": digest}
    assert manifests.load_manifest(committed, run_dir) == many
    path = os.path.join(run_dir, ref)
    document = orjson.loads(open(path, "rb").read())
    assert document["v"] == 1
    data = orjson.dumps({**document, "v": 3})
    with open(path, "wb") as handle:
        handle.write(data)
    import hashlib

    committed["manifest_sha256"] = hashlib.sha256(data).hexdigest()
    with pytest.raises(FormatError, match="manifest written in format v3"):
        manifests.load_manifest(committed, run_dir)


def test_a_plan_is_read_back_into_the_types_it_was_written_from():
    from sparkrecover.kinds import Verdict

    entry = plans.PlanEntry(
        "w",
        Verdict.CONTINUE,
        "2/4 partitions kept",
        kind="write",
        upstream=["a"],
        committed=plans.Committed(attempt=1, paths=["file:/o"], format="parquet", superseded_by="x"),
        restore=[{"path": "file:/o", "category": "append"}],
        fingerprint={"digest": "d1"},
        partitions=plans.PartitionCount(kept=2, total=4),
        tasks=plans.KeptTasks(kept=[0, 3], partitions=4, shape="s", empty=[3]),
    )
    plan = plans.Plan("r", 3, [entry])
    back = plans.read_plan(plans.encode(plan), "0003.json")
    assert back == plan and back.stages[0].decision is Verdict.CONTINUE
    assert back.stages[0].fingerprint_digest == "d1" and not back.stages[0].superseded


@pytest.mark.parametrize(
    "stage, message",
    [
        (
            {"stage": "s", "decision": "maybe", "reason": ""},
            "stages[0].decision must be one of skip, run, rerun, lost, continue, not 'maybe'",
        ),
        ({"stage": "s", "reason": ""}, "stages[0].decision is missing"),
        ({"stage": 3, "decision": "run", "reason": ""}, "stages[0].stage must be a string, not 3"),
        (
            {"stage": "s", "decision": "continue", "reason": "", "tasks": {"kept": [0, "1"], "partitions": 2}},
            "stages[0].tasks.kept[1] must be an integer, not '1'",
        ),
        (
            {"stage": "s", "decision": "skip", "reason": "", "committed": {"attempt": "1", "paths": []}},
            "stages[0].committed.attempt must be an integer, not '1'",
        ),
        (
            {"stage": "s", "decision": "skip", "reason": "", "committed": {"attempt": True, "paths": []}},
            "stages[0].committed.attempt must be an integer, not True",
        ),
        (
            {"stage": "s", "decision": "continue", "reason": "", "tasks": {"kept": [0]}},
            "stages[0].tasks.partitions is missing",
        ),
        (
            {"stage": "s", "decision": "run", "reason": "", "upstream": None},
            "stages[0].upstream must be a list, not None",
        ),
        (
            {"stage": "s", "decision": "run", "reason": "", "partitons": {"kept": 1, "total": 2}},
            "stages[0].partitons is not a field this sparkrecover knows",
        ),
    ],
)
def test_a_plan_with_a_field_missing_unknown_or_of_the_wrong_type_is_refused_naming_it(stage, message):
    raw = orjson.dumps({"v": 1, "run": "r", "attempt": 2, "stages": [stage]})
    with pytest.raises(FormatError) as caught:
        plans.read_plan(raw, "0002.json")
    assert str(caught.value) == f"0002.json: {message}" and caught.value.exit_code == 3


@pytest.mark.parametrize(
    "document, message",
    [
        ({"v": 1, "run": "r", "stages": []}, "attempt is missing"),
        ({"v": 1, "run": "r", "attempt": 2, "stages": [], "extra": 1}, "extra is not a field this sparkrecover knows"),
        ({"v": 1, "run": "r", "attempt": 2, "stages": {}}, "stages must be a list, not {}"),
        ({"v": 1, "run": "r", "attempt": 2, "stages": ["skip"]}, "stages[0] must be an object, not 'skip'"),
    ],
)
def test_the_plan_itself_is_checked_as_strictly_as_its_entries(document, message):
    with pytest.raises(FormatError) as caught:
        plans.read_plan(orjson.dumps(document), "0002.json")
    assert str(caught.value) == f"0002.json: {message}"
