"""Is the script the same? One digest, which the driver salts a write's shape with and submit hands
the JVM for the shuffle identity (core/verdicts/staleness.py)."""

from __future__ import annotations

import hashlib

from sparkrecover.core.verdicts import staleness
from sparkrecover.launch import shuffles
from sparkrecover.launch.spark_argv import split_submit_args
from sparkrecover.rundir import storage


def test_every_byte_of_the_script_counts(tmp_path):
    script = tmp_path / "etl.py"
    script.write_text("print('etl')\n")
    first = staleness.script_digest(str(script), storage.read_bytes)
    assert first == hashlib.sha256(b"print('etl')\n").hexdigest()
    assert staleness.script_digest(str(script), storage.read_bytes) == first
    script.write_text("print('etl')\n# a comment\n")  # a UDF's body is not in Spark's plans either
    assert staleness.script_digest(str(script), storage.read_bytes) != first


def test_a_script_that_cannot_be_read_is_never_the_same_as_another(tmp_path):
    missing = str(tmp_path / "gone.py")
    first = staleness.script_digest(missing, storage.read_bytes)
    assert first.startswith("unreadable-")
    assert staleness.script_digest(missing, storage.read_bytes) != first


def test_the_shuffle_identity_is_given_the_same_digest(tmp_path, monkeypatch):
    script = tmp_path / "etl.py"
    script.write_text("print('etl')\n")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "spark-local"))
    setup = shuffles.setup(
        split_submit_args(["--master", "local[2]", str(script)]), str(tmp_path / "run"), "link", jar="/x.jar"
    )
    assert f"spark.sparkrecover.shuffle.script={staleness.script_digest(str(script), storage.read_bytes)}" in (
        setup.options
    )
