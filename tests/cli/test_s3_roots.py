"""The CLI on S3 (a moto server on 127.0.0.1) and other roots, no Spark: cluster mode's checks,
an unreachable S3, and an S3 run directory inspected like a local one.
"""

from __future__ import annotations

import orjson
import pytest

from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run
from tests.helpers import events_of


def fake_spark_submit(tmp_path) -> str:
    script = tmp_path / "spark-submit"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    (tmp_path / "app.py").write_text("print('hi')\n")
    return str(script)


# -- the CLI on S3 and other roots (no Spark) --------------------------------------------------------


@pytest.mark.parametrize("root", ["memory://runs", "./runs", "file:///tmp/runs"])
def test_cluster_mode_refuses_a_root_the_driver_cannot_reach(cli, tmp_path, root):
    code, out, err = cli(
        "submit",
        "--root",
        root,
        "--spark-submit",
        fake_spark_submit(tmp_path),
        "--",
        "--deploy-mode",
        "cluster",
        "app.py",
    )
    assert code == 2 and out == ""
    assert "--deploy-mode cluster needs --root on shared storage" in err and "Traceback" not in err


def test_cluster_mode_accepts_an_s3_root_and_refuses_a_local_checkpoint_root(cli, tmp_path, s3):
    spark_submit = fake_spark_submit(tmp_path)
    code, _, err = cli(
        "submit",
        "--root",
        s3.prefix,
        "--checkpoint-root",
        str(tmp_path / "ckpt"),
        "--spark-submit",
        spark_submit,
        "--",
        "--deploy-mode",
        "cluster",
        "app.py",
    )
    assert code == 2 and "--deploy-mode cluster needs --checkpoint-root on shared storage" in err
    code, out, err = cli(
        "submit",
        "--root",
        s3.prefix,
        "--run-id",
        "c1",
        "--checkpoint-root",
        s3.prefix + "/ckpt",
        "--spark-submit",
        spark_submit,
        "--json",
        "--",
        "--deploy-mode",
        "cluster",
        "app.py",
    )
    assert code == 0, err
    assert orjson.loads(out)["run_dir"] == s3.prefix + "/c1"
    # the fake spark-submit ran no driver: the CLI says the driver's journal is incomplete
    assert "no driver.ended record" in err
    started = next(e for e in events_of(s3.prefix + "/c1") if e["type"] == "run.started")
    assert started["checkpoint_root"] == s3.prefix + "/ckpt"
    assert not storage.exists(s3.prefix + "/c1/lease.json")


def test_unreachable_s3_is_one_line_and_exit_3(cli, monkeypatch, s3):
    import s3fs

    s3.stop()  # the port is closed: connection refused
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        code, out, err = cli("inspect", "--root", s3.prefix)
    finally:
        s3.start()
        s3fs.S3FileSystem.clear_instance_cache()
    assert code == 3 and out == ""
    assert err.startswith("error: ") and "could not list" in err and "Traceback" not in err
    assert err.count("error:") == 1  # one message (rich may wrap it at the terminal width)


def test_an_s3_run_directory_url_is_inspected_like_a_local_one(cli, s3, monkeypatch):
    from sparkrecover.journal import JournalWriter, events

    run_dir = s3.prefix + "/r9"
    writer = JournalWriter(Run("r9", run_dir), 1, "cli", flush_interval=0)
    writer.emit(events.RUN_STARTED, app="etl.py")
    writer.emit(events.ATTEMPT_ENDED, exit_code=0)
    writer.close()
    code, out, err = cli("inspect", "--root", s3.prefix, "--json")
    assert code == 0, err
    assert [row["run"] for row in orjson.loads(out)["runs"]] == ["r9"]
    code, out, _ = cli("inspect", run_dir, "--json")
    assert orjson.loads(out)["status"] == "succeeded"
    monkeypatch.setenv("SPARKRECOVER_ROOT", s3.prefix)
    code, out, _ = cli("inspect", "r9", "--json")
    assert (code, orjson.loads(out)["run_dir"]) == (0, run_dir)
