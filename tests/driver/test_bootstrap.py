"""The driver bootstrap refuses a plan it cannot read before it runs anything."""

from __future__ import annotations

import orjson

from sparkrecover.driver import bootstrap
from sparkrecover.rundir.lease import Lease
from sparkrecover.rundir.runs import Run


def test_a_plan_of_a_newer_format_stops_the_driver_with_exit_3(tmp_path, capsys):
    plan = tmp_path / "0002.json"
    plan.write_bytes(orjson.dumps({"v": 2, "stages": []}))
    script = tmp_path / "app.py"
    script.write_text("open('ran', 'w').close()\n")
    run_dir = str(tmp_path / "run")
    lease = Lease(Run("r", run_dir)).acquire()  # the command that launched the driver holds the run
    try:
        given = ["--run-dir", run_dir, "--run-id", "r", "--attempt", "2", "--lease-token", lease.token]
        code = bootstrap.main([*given, "--plan", str(plan), "--", str(script)])
    finally:
        lease.release()
    assert code == 3
    assert not (tmp_path / "ran").exists() and not (tmp_path / "run" / "journal").exists()
    assert "plan written in format v2; this sparkrecover reads v1" in capsys.readouterr().err
