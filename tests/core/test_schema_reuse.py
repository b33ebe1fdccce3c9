"""Inferred schemas, the command line's half (no Spark): the fold keeps the latest per read key,
resume plans the ones whose recorded input files are unchanged and shows them."""

from __future__ import annotations

import json
import os

import pytest

from sparkrecover.core.verdicts import schema_reuse
from sparkrecover.core.verdicts.staleness import digest, stat_files
from sparkrecover.journal import events as ev
from sparkrecover.planning.next_attempt import plan_resume, read_run
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run


def inferred(run, folder, key="etl.py:7 json", fields=("id",), listed=True):
    """A schema.inferred as the driver writes it, for the files under ``folder`` as they are now."""
    rows = stat_files((os.path.join(folder, name) for name in os.listdir(folder)), storage.stat)
    schema = {
        "type": "struct",
        "fields": [{"name": f, "type": "long", "nullable": True, "metadata": {}} for f in fields],
    }
    payload = {
        "key": key,
        "format": "json",
        "paths": [str(folder)],
        "call_site": "etl.py:7",
        "schema": schema,
        "input_digest": digest(rows),
        "input_count": len(rows),
        "duration_s": 1.0,
    }
    if listed:
        payload["input_files"] = rows
    run.driver.emit(ev.SCHEMA_INFERRED, **payload)
    return run


@pytest.fixture
def raw(tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text('{"id": 1}\n')
    return folder


def test_the_fold_keeps_the_latest_schema_per_key(run, raw):
    inferred(run, raw, fields=("id",))
    inferred(run, raw, key="etl.py:9 json", fields=("x",))
    run.end(exit_code=137)
    inferred(run.start_attempt(), raw, fields=("id", "name"))
    run.driver.emit(ev.SCHEMA_REUSED, key="etl.py:9 json")
    state = run.end().state()
    assert list(state.schemas) == ["etl.py:9 json", "etl.py:7 json"]
    assert [f["name"] for f in state.schemas["etl.py:7 json"]["schema"]["fields"]] == ["id", "name"]
    assert state.schemas["etl.py:7 json"]["attempt"] == 2 and state.other_events == 0


def test_unchanged_inputs_are_reused_and_changed_or_vanished_ones_are_not(run, raw, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "c.json").write_text('{"id": 2}\n')
    inferred(run, raw)
    inferred(run, other, key="etl.py:9 json")
    state = run.end().state()
    (planned,) = [entry for entry in schema_reuse.reusable(state, storage.stat) if entry.key == "etl.py:7 json"]
    assert planned.reason == "inputs unchanged" and planned.input_count == 2
    assert planned.schema == state.schemas["etl.py:7 json"]["schema"] and planned.attempt == 1
    assert [e.key for e in schema_reuse.reusable(state, storage.stat, from_scratch=True)] == []

    (raw / "a.json").write_text('{"id": 1, "name": "longer now"}\n')
    (other / "c.json").unlink()
    assert schema_reuse.reusable(state, storage.stat) == []


def test_an_unlisted_input_is_left_to_the_driver(run, raw):
    state = inferred(run, raw, listed=False).end().state()
    (entry,) = schema_reuse.reusable(state, storage.stat)
    assert entry.reason == "2 input files, checked when read"


def test_the_plan_and_the_dry_run_carry_the_schemas(run, raw, cli, tmp_path):
    run.done("load")
    state_dir = inferred(run, raw).end(exit_code=137).dir
    run = Run("r1", state_dir)
    plan = plan_resume(read_run(run), run, 2)
    document = plan.document().to_json()
    assert [s["stage"] for s in document["stages"]] == ["load"]  # the stage decisions as before
    assert document["schemas"][0]["schema"]["fields"][0]["name"] == "id"
    assert document["schemas"][0]["input_digest"] == plan.state.schemas["etl.py:7 json"]["input_digest"]

    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["schemas"] == [
        {
            "key": "etl.py:7 json",
            "format": "json",
            "paths": [str(raw)],
            "call_site": "etl.py:7",
            "attempt": 1,
            "reason": "inputs unchanged",
        }
    ]
    code, out, _ = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run")
    assert code == 0 and f"reuse the schema of json {raw} (inputs unchanged)\n" in out
    code, out, _ = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json", "--from-scratch")
    assert json.loads(out)["schemas"] == []
