"""Inferred schemas end to end: a run killed after its first write resumes without
inferring the schema of its input again."""

from __future__ import annotations

import glob
import json
import os

import orjson
import pytest

from tests.e2e.support import APPS, submit_and_kill
from tests.helpers import events_of, line_of, run_cli

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "schema_app.py")


def test_a_resumed_run_reuses_the_inferred_schema_of_unchanged_input(tmp_path):
    raw, out, root = tmp_path / "raw", str(tmp_path / "out"), str(tmp_path / "root")
    raw.mkdir()
    for part in range(3):
        (raw / f"part-{part}.json").write_text(
            "".join(json.dumps({"id": part * 10 + i, "kind": "ab"[i % 2], "value": i / 2}) + "\n" for i in range(10))
        )
    clean = f"schema_app.py:{line_of(APP, '.parquet(f')}#1 overwrite {out}/clean"
    run_dir = submit_and_kill(root, "etl", [str(raw), out], after_stage=clean, cwd=str(tmp_path), app=APP)
    first = [e for e in events_of(run_dir) if e["type"] == "schema.inferred"]
    assert [(e["attempt"], e["format"], e["paths"], e["input_count"]) for e in first] == [(1, "json", [str(raw)], 3)]
    assert not os.path.exists(os.path.join(out, "report"))

    dry = run_cli("resume", "etl", "--root", root, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    (planned,) = orjson.loads(dry.stdout)["schemas"]
    assert (planned["key"], planned["format"], planned["paths"], planned["reason"]) == (
        first[0]["key"],
        "json",
        [str(raw)],
        "inputs unchanged",
    )
    shown = run_cli("resume", "etl", "--root", root, "--dry-run")
    assert f"reuse the schema of json {raw} (inputs unchanged)" in shown.stdout

    result = run_cli("resume", "etl", "--root", root)
    assert result.returncode == 0, result.stderr[-3000:]
    second = [e for e in events_of(run_dir) if e["attempt"] == 2]
    assert [(e["type"], e["key"]) for e in second if e["type"].startswith("schema.")] == [
        ("schema.reused", first[0]["key"])
    ]
    assert ("stage.skipped", clean) in [(e["type"], e.get("stage")) for e in second]
    counts = [
        json.loads(line)
        for name in sorted(glob.glob(os.path.join(out, "report", "part-*")))
        for line in open(name).read().splitlines()
    ]
    assert counts == [{"kind": "a", "count": 15}, {"kind": "b", "count": 15}]
