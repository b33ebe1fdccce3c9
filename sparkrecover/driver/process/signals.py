"""A driver stopped by SIGINT or SIGTERM keeps what it finished
(docs/decisions/0036-driver-stopped-by-a-signal.md).

People stop a driver with Ctrl-C (SIGINT), clusters and orchestrators with SIGTERM. Left to
pyspark and Python, SIGINT cancels the jobs and raises ``KeyboardInterrupt`` and SIGTERM kills the
process on the spot; either way Spark then aborts the running write, whose job abort deletes the
partitions it committed, and a SIGTERM loses the journal lines not yet written.

While the script runs, the first SIGINT or SIGTERM:

1. tells the JVM (``DriverSignals.interrupted``) that the driver is being stopped, so that the
   write's job abort keeps its committed task output (``FencedCommitProtocol.abortJob``), as a
   SIGKILL would have left it;
2. cancels the application's Spark jobs, as pyspark's own SIGINT handler does;
3. raises ``KeyboardInterrupt`` in the script, for SIGTERM its subclass ``Stopped``: what a script
   does on Ctrl-C (its ``finally`` blocks, an ``except KeyboardInterrupt``) it does on either, and
   ``except Exception`` swallows neither. py4j, too, knows a ``KeyboardInterrupt`` that cuts a call
   short and closes that call's connection (any other exception would leave the next call on this
   thread reading the old call's answer).

The bootstrap then journals ``driver.ended`` with the signal, after draining the listener (the
``task.committed`` and ``shuffle.committed`` lines it still held), and exits 130 or 143. A stage
the signal stopped is not journaled as failed: like after a SIGKILL it stays started, so a resume
continues it. Later signals, and any signal once the script has ended, change nothing: the driver
is already winding down. ``attach`` also hands the JVM's own SIGINT and SIGTERM to this process
(``DriverSignals.install``): launchers signal ``spark-submit``, whose JVM would otherwise shut down
under the driver before it journals anything.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from sparkrecover import jvm

STOPPING = (signal.SIGINT, signal.SIGTERM)
# Longest wait for the JVM to hear of the signal and cancel the jobs (it answers in milliseconds
# unless it is going too).
STOP_WAIT_S = 5.0


class Stopped(KeyboardInterrupt):
    """Raised in the script by SIGTERM."""


_raising = False  # the script runs: a first signal stops it
_ignored: set[int] = set()  # signals ignored when the bootstrap started: left so


def install(rt: Any) -> None:
    """Handle SIGINT and SIGTERM from now until ``quiet()`` (the bootstrap, before the script). A
    signal this process was started ignoring (``nohup``, a shell's background job) stays ignored."""
    global _raising, _ignored
    if not _raising:
        _ignored = {signum for signum in STOPPING if signal.getsignal(signum) is signal.SIG_IGN}
    _raising = True
    for signum in STOPPING:
        if signum not in _ignored:
            signal.signal(signum, lambda number, _frame: _on_signal(rt, number))


def quiet() -> None:
    """The script has ended: signals from now on are left to the wind-down under way."""
    global _raising
    _raising = False


def attach(rt: Any, sc: Any) -> str | None:
    """Once the script's SparkContext exists: take SIGINT back from pyspark's handler (which
    cancels the jobs and raises before the JVM knows why) and hand the JVM's own SIGINT and SIGTERM
    to this process. Returns None when the JVM hands them on, else why not."""
    if threading.current_thread() is threading.main_thread() and _raising:
        install(rt)
    try:
        found = jvm.find_class(sc._jvm, jvm.SIGNALS_CLASS)
        problem = found.install(os.getpid()) if found is not None else "the sparkrecover jar is not loaded"
    except Exception as error:  # Spark Connect, a JVM going away
        problem = f"the JVM cannot be asked ({type(error).__name__})"
    return str(problem) if problem else None


def name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _on_signal(rt: Any, signum: int) -> None:
    if not _raising or rt.interrupted is not None:
        return
    rt.interrupted = signum
    pyspark = sys.modules.get("pyspark")  # not imported: no SparkContext, nothing to tell
    sc = pyspark.SparkContext._active_spark_context if pyspark is not None else None
    if sc is not None:
        # From another thread: this one may be inside a Py4J call (the write), and its Py4J
        # connection cannot carry a second call until that one returns.
        telling = threading.Thread(target=_stop_jobs, args=(sc, name(signum)), name="sparkrecover-stop", daemon=True)
        telling.start()
        telling.join(STOP_WAIT_S)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(name(signum))


def exit_code(rt: Any) -> int:
    """What a driver stopped by a signal exits with: 128 + its number (130 for Ctrl-C)."""
    return 128 + (rt.interrupted or signal.SIGINT)


def _stop_jobs(sc: Any, why: str) -> None:
    try:
        found = jvm.find_class(sc._jvm, jvm.SIGNALS_CLASS)
        if found is not None:  # without the jar, job aborts clean up as Spark's do
            found.interrupted(why)
    except Exception:
        pass  # the JVM is going too
    try:
        sc.cancelAllJobs()
    except Exception:
        pass  # the JVM is going too
