"""The driver's own lines reach spark-submit's stderr, not the application's stdout
(driver/process/messages.py): Spark's PythonRunner copies the Python driver's stdout *and* stderr
to the JVM's stdout, so under it (``PYSPARK_GATEWAY_PORT`` set) the lines are printed by the JVM's
``System.err``. Here the session's JVM's ``System.err`` is captured for the test; on a real
spark-submit the same is checked by tests/e2e/test_e2e_restart.py (the command run again)."""

from __future__ import annotations

import contextlib

from sparkrecover.driver.process import messages, which_attempt


@contextlib.contextmanager
def jvm_stderr(spark):
    jvm = spark.sparkContext._jvm
    captured = jvm.java.io.ByteArrayOutputStream()
    before = jvm.System.err
    jvm.System.setErr(jvm.java.io.PrintStream(captured, True, "UTF-8"))
    try:
        yield captured
    finally:
        jvm.System.setErr(before)


def test_under_spark_submit_the_driver_says_its_lines_on_the_jvms_stderr(spark, monkeypatch, capsys):
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # what PythonRunner gives the driver it starts
    with jvm_stderr(spark) as captured:
        which_attempt.say("run r1: this driver starts it, as attempt 1")
        messages.say("sparkrecover: warning: something")
    assert captured.toString("UTF-8").splitlines() == [
        "sparkrecover: run r1: this driver starts it, as attempt 1",
        "sparkrecover: warning: something",
    ]
    seen = capsys.readouterr()
    assert "sparkrecover" not in seen.out + seen.err  # what PythonRunner would copy to stdout


def test_outside_spark_submit_the_lines_go_to_stderr(spark, monkeypatch, capsys):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    with jvm_stderr(spark) as captured:
        messages.say("sparkrecover: warning: something")
    assert captured.toString("UTF-8") == ""
    assert capsys.readouterr().err == "sparkrecover: warning: something\n"
