"""End to end on real Spark: what submit prints when its driver is SIGKILLed and retried
(docs/cli-output.md): one JSON document on stdout with --json, the application's own stdout on
stderr, and the killed attempt named as a crash of the whole tree would be."""

from __future__ import annotations

import orjson
import pytest

from tests.e2e.support import TINY
from tests.helpers import SPARK_OPTIONS, run_cli

pytestmark = pytest.mark.e2e


def test_submit_json_after_a_killed_driver_and_its_retry(tmp_path):
    (tmp_path / "in.csv").write_text("a,1\nb,2\na,3\n")
    app = tmp_path / "talking.py"  # tiny.py, after a print of its own on stdout
    app.write_text(
        f"import runpy\n\nprint('hello from the app', flush=True)\nrunpy.run_path({TINY!r}, run_name='__main__')\n"
    )
    root, report = str(tmp_path / "root"), str(tmp_path / "report.txt")
    result = run_cli(
        "submit", "--root", root, "--run-id", "k", "--max-attempts", "2", "--json", "--", *SPARK_OPTIONS,
        str(app), str(tmp_path / "in.csv"), report, "--die-once", str(tmp_path / "died"),
        cwd=str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    document = orjson.loads(result.stdout)  # stdout is the document alone
    assert "hello from the app" in result.stderr
    assert open(report).read() == "a,4\nb,2\n"
    assert (document["run"], document["outcome"], document["exit_code"]) == ("k", "succeeded", 0)
    # the driver SIGKILLed while the CLI survived: "crashed", as when the whole tree dies
    assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in document["attempts"]] == [
        (1, "crashed", 137),
        (2, "succeeded", 0),
    ]
    assert {s["stage"]: (s["decision"], s["outcome"]) for s in document["stages"]} == {
        "load": ("skip", "skipped"),
        "total": ("run", "committed"),
        "report": ("run", "committed"),
    }
    assert document["saved_s"] > 0  # load's recorded duration
    inspected = orjson.loads(run_cli("inspect", "k", "--root", root, "--json").stdout)
    assert [a["outcome"] for a in inspected["attempts"]] == ["crashed", "succeeded"]
