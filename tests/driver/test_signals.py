"""A driver stopped by SIGINT or SIGTERM keeps what it finished (driver/process/signals.py and the JVM's
DriverSignals and FencedCommitProtocol.abortJob), on the session's real Spark: a write cancelled
because the driver is being stopped keeps its committed task folders, one cancelled for any other
reason is aborted as Spark aborts it. The bootstrap's side runs as its own process (no Spark)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import sparkrecover as sr
from sparkrecover.driver import bootstrap
from sparkrecover.driver.process import signals
from sparkrecover.journal import read_journal
from sparkrecover.jvm import COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS, SIGNALS_CLASS, find_class
from tests.helpers import install_runtime, journal

PARTS = 8


def slow_rows(spark):
    """PARTS partitions of 100 rows; each partition's first row takes a moment."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    def work(value):
        if value % 100 == 0:
            time.sleep(0.5)
        return value

    return spark.range(0, PARTS * 100, numPartitions=PARTS).withColumn("v", F.udf(work, LongType())("id"))


def committed(out: str) -> list[str]:
    return glob.glob(os.path.join(out, "_temporary", "0", "task_*"))


def wait_until(done, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


@pytest.fixture
def protocol(spark, jvm):
    """Every write through FencedCommitProtocol (unarmed: no lease), as under submit; the JVM's
    DriverSignals forgotten afterwards (the tests share one JVM)."""
    spark.conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)
    signals_class = find_class(jvm, SIGNALS_CLASS)
    yield signals_class
    signals_class.reset()
    spark.conf.unset(COMMIT_PROTOCOL_CONF)


def write_in_background(spark, out: str) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def write():
        try:
            slow_rows(spark).write.parquet(out)
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    wait_until(lambda: len(committed(out)) >= 3)
    return thread, failures


@pytest.mark.parametrize("why", ["SIGTERM", "gone", None])
def test_a_write_cancelled_because_the_driver_stops_keeps_its_committed_tasks(spark, protocol, tmp_path, why):
    """Told the driver is being stopped (its signal handler calls interrupted) or finding the
    Python driver's process gone, the job abort leaves committed task folders where a SIGKILL leaves
    them; cancelled by the application itself, the job is
    aborted as Spark aborts it (the committed task folders go with _temporary)."""
    out = str(tmp_path / "out")
    thread, failures = write_in_background(spark, out)
    if why == "gone":
        finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
        protocol.watch(int(finished.stdout))  # a process that has ended
    elif why is not None:
        protocol.interrupted(why)
    before = len(committed(out))
    spark.sparkContext.cancelAllJobs()
    thread.join(120)
    assert failures and "cancel" in str(failures[0]).lower()
    if why is None:  # Spark's abort deleted _temporary (a task still running may leave empty folders)
        assert committed(out) == []
        return
    assert before <= len(committed(out)) < PARTS
    for task in committed(out):
        assert [name for name in os.listdir(task) if name.startswith("part-")]
    assert not [name for name in os.listdir(out) if name.startswith("part-")] and "_SUCCESS" not in os.listdir(out)


def test_a_failed_write_is_cleaned_up_as_spark_does(spark, protocol, tmp_path):
    out = str(tmp_path / "out")
    protocol.watch(os.getpid())  # the driver is alive: a failure is a failure
    with pytest.raises(Exception, match="too big"):
        failing = spark.range(0, 100, numPartitions=4).selectExpr("IF(id < 60, id, raise_error('too big')) AS v")
        failing.write.parquet(out)
    assert protocol.interruption() is None
    assert committed(out) == []  # partitions 0 and 1 had committed: Spark's abort deleted them


@pytest.fixture
def handlers(spark):
    """The process's SIGINT and SIGTERM handlers as they were, afterwards, and the session active
    again in this thread: py4j closes the connection a KeyboardInterrupt cut short, and the next
    call runs on a new JVM thread, which has no active session."""
    before = {signum: signal.getsignal(signum) for signum in signals.STOPPING}
    yield
    signals.quiet()
    for signum, handler in before.items():
        signal.signal(signum, handler)
    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)


def test_sigterm_during_a_stage_stops_it_keeping_its_committed_partitions(spark, protocol, tmp_path, handlers):
    """The handler tells the JVM, cancels the jobs and raises Stopped (a KeyboardInterrupt) in the
    script; the stage stays started (as after a SIGKILL: a resume continues it), not failed."""
    rt = install_runtime(tmp_path)
    signals.install(rt)
    out = str(tmp_path / "out")

    def stop_when_committed():
        wait_until(lambda: len(committed(out)) >= 3)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_committed, daemon=True).start()
    with pytest.raises(signals.Stopped):
        sr.checkpoint("nums", slow_rows(spark), path=out)
    assert rt.interrupted == signal.SIGTERM and signals.exit_code(rt) == 143
    assert 3 <= len(committed(out)) < PARTS
    assert [e["type"] for e in journal(rt) if e["type"].startswith("stage.")] == ["stage.started"]
    os.kill(os.getpid(), signal.SIGTERM)  # a second signal changes nothing
    assert rt.interrupted == signal.SIGTERM


def test_one_ctrl_c_reaching_the_jvm_twice_is_one_stop_and_a_later_one_a_second(protocol):
    """A terminal's Ctrl-C reaches spark-submit's JVM directly and again through sparkrecover
    submit, which forwards it: the JVM hands it to the driver once and waits for it. A second
    signal a moment later ends the JVM at once (the driver's wind-down is taking too long)."""
    same_stop = protocol.SAME_STOP_MS
    assert protocol.receive("INT", 50_000) == 1
    assert protocol.receive("INT", 50_000 + same_stop // 10) == 0  # the same Ctrl-C, forwarded
    assert protocol.receive("TERM", 50_000 + same_stop // 5) == 2  # another signal is another stop
    assert protocol.receive("TERM", 50_000 + 3 * same_stop) == 3
    assert protocol.interruption() == "SIGINT"  # the first word stays


SCRIPT = """
import os, signal, sys, time
try:
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(30)
    open("not-stopped", "w").close()
finally:
    open("cleaned-up", "w").close()
"""


def run_bootstrap(tmp_path, script: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The bootstrap as spark-submit runs it, on a script that needs no Spark: (the process, its
    driver.ended)."""
    app = tmp_path / "app.py"
    app.write_text(script)
    run_dir = str(tmp_path / "run")
    command = [sys.executable, bootstrap.__file__, "--run-dir", run_dir, "--run-id", "r", "--attempt", "1"]
    done = subprocess.run([*command, "--", str(app), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    (ended,) = [e for e in read_journal(run_dir) if e["type"] == "driver.ended"]
    return done, ended


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_the_bootstrap_journals_the_signal_and_exits_128_plus_n(tmp_path, name, code):
    """The script's finally blocks run, driver.ended says which signal, the exit code is 128 + N
    (spark-submit passes it on)."""
    done, ended = run_bootstrap(tmp_path, SCRIPT, name)
    assert done.returncode == code, done.stderr
    assert (tmp_path / "cleaned-up").exists() and not (tmp_path / "not-stopped").exists()
    number = getattr(signal, name)
    assert (ended["exit_code"], ended["signal"], ended["error"]) == (code, number, f"interrupted by {name}")
    assert f"stopped by {name}" in done.stderr and "Traceback" not in done.stderr


def test_a_driver_whose_jvm_is_gone_still_journals_how_it_ended(tmp_path):
    """spark-submit's JVM carries the driver's stdout and stderr (PythonRunner pipes them): when a
    second signal ends that JVM first, each line the driver prints on its way out fails with a
    broken pipe. driver.ended is journaled all the same: a launcher reads it once spark-submit
    exits."""
    outlived = (
        "import os, signal, time\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "finally:\n"
        "    open('signalled', 'w').close()\n"
        "    while not os.path.exists('pipe-gone'):\n"
        "        time.sleep(0.01)\n"
    )
    app = tmp_path / "app.py"
    app.write_text(outlived)
    run_dir = str(tmp_path / "run")
    command = [sys.executable, bootstrap.__file__, "--run-dir", run_dir, "--run-id", "r", "--attempt", "1"]
    reading, writing = os.pipe()
    driver = subprocess.Popen([*command, "--", str(app)], cwd=tmp_path, stdout=writing, stderr=writing)
    os.close(writing)
    try:
        wait_until(lambda: (tmp_path / "signalled").exists())
    finally:
        os.close(reading)  # the JVM that read the driver's output is gone
        (tmp_path / "pipe-gone").touch()
    assert driver.wait(timeout=120) in (130, 120)  # 120: Python could not flush its stdout at exit
    (ended,) = [e for e in read_journal(run_dir) if e["type"] == "driver.ended"]
    assert (ended["exit_code"], ended["signal"], ended["error"]) == (130, signal.SIGINT, "interrupted by SIGINT")


def test_a_script_that_ends_on_its_own_after_a_signal_keeps_its_exit_code(tmp_path):
    caught = "import os, signal\ntry:\n    os.kill(os.getpid(), signal.SIGTERM)\nexcept KeyboardInterrupt:\n    pass\n"
    done, ended = run_bootstrap(tmp_path, caught)
    assert done.returncode == 0, done.stderr
    assert (ended["exit_code"], ended["signal"], ended["error"]) == (0, signal.SIGTERM, None)


def test_a_call_the_signal_cut_short_failing_otherwise_still_exits_as_the_signal(tmp_path):
    """The signal's KeyboardInterrupt may surface as another error: a Py4J call it cut short
    fails with the connection's error ('Answer from Java side is empty'). The driver was stopped
    all the same: exit 128 + N, as a launcher expects, not 1."""
    cut_short = (
        "import os, signal\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "except KeyboardInterrupt:\n"
        "    raise RuntimeError('Answer from Java side is empty')\n"
    )
    done, ended = run_bootstrap(tmp_path, cut_short)
    assert done.returncode == 130, done.stderr
    assert (ended["exit_code"], ended["signal"], ended["error"]) == (130, signal.SIGINT, "interrupted by SIGINT")


def test_a_stage_stopped_by_a_signal_ends_with_stopped_even_when_the_jvm_connection_was_cut(tmp_path):
    """A signal can interrupt a Py4J call half-way (the script's ``save``), leaving the connection
    broken: the stage's scope then makes no call into the JVM on its way out, so the script sees
    Stopped (its ``except KeyboardInterrupt`` and the exit code 128+N), not a network error."""
    from sparkrecover.driver.lifecycle.stages import Scope

    class CutConnection:
        """A SparkContext whose Py4J connection the interrupted command broke."""

        def __init__(self) -> None:
            self.cut = False

        def getLocalProperty(self, key):
            return None

        def setLocalProperty(self, key, value):
            if self.cut:
                raise ConnectionError("Answer from Java side is empty")

        def setJobDescription(self, value):
            self.setLocalProperty("spark.job.description", value)

    class Session:
        sparkContext = CutConnection()

    rt = install_runtime(tmp_path)
    with pytest.raises(signals.Stopped):
        with Scope(rt, Session(), "nums"):
            Session.sparkContext.cut = True
            rt.interrupted = signal.SIGTERM
            raise signals.Stopped()
    assert [e["type"] for e in journal(rt) if e["type"].startswith("stage.")] == []
