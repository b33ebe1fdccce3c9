"""Spark scheduler events into the journal: the driver's side of the listeners (docs/design.md §6).

With the JVM listener (sparkrecover/jvm/bridge/SparkRecoverListener.java, which ``submit`` registers
through ``spark.extraListeners``) events are summarised inside the driver JVM, and a daemon thread
here drains them with one Py4J call every flush interval, before each stage commit (so the commit
lists the stage's Spark jobs) and at driver end. Each drained line becomes one journal event.
Finished work (a write task's commit, a kept shuffle map output) is drained and handed to the
journal within milliseconds: the thread waits inside the JVM for such a line instead of sleeping
(``awaitCoordinatorLines``), because whatever a killed driver had not journaled runs again on
resume, however long ago the task finished.
Without the jar, the Py4J listener (listener.py) runs on its own listener queue instead. Either
way Spark's count of dropped listener events is journaled (``spark.events.dropped``) and reported
in ``driver.ended``.

Scheduler events are telemetry (§4 rule 6): a failure here is reported once, on stderr, and never
reaches the application.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson

from sparkrecover.driver.process import messages
from sparkrecover.driver.process.runtime import Runtime
from sparkrecover.journal import events as ev
from sparkrecover.jvm import LISTENER_CLASS, find_class

JVM, PY4J = "jvm", "py4j"
# Longest wait at driver end for Spark's listener queues to hand over their last events.
FINAL_WAIT_MS = 3000
# The pause after a drain woken by finished work grows with what that drain found: tasks of a
# second or more (one or two lines) are journaled within milliseconds of each other, even when
# two slots finish together, while a write of thousands of tiny tasks (cheap to run again)
# settles at a few drains a second, each taking all that is waiting, not one Py4J call per task.
DRAIN_GAP_PER_LINE = 0.005
MAX_DRAIN_GAP = 0.5

# The JVM listener's "k" -> the journal event it becomes.
_TYPES = {
    "job.started": ev.SPARK_JOB_STARTED,
    "job.ended": ev.SPARK_JOB_ENDED,
    "stage.completed": ev.SPARK_STAGE_COMPLETED,
    "executor.removed": ev.SPARK_EXECUTOR_REMOVED,
    "executor.lost": ev.EXECUTOR_LOST,
    "events.dropped": ev.SPARK_EVENTS_DROPPED,
    "task.committed": ev.TASK_COMMITTED,
    "shuffle.registered": ev.SHUFFLE_REGISTERED,
    "shuffle.unsupported": ev.SHUFFLE_UNSUPPORTED,
}
# Kept map outputs arrive one line each; a drain journals them as one shuffle.committed per shuffle.
_MAP_KEPT = "shuffle.map"

Drain = Callable[[], list[dict[str, Any]]]
# Waits (at most the given milliseconds) for a line recording finished work; True when one came.
Await = Callable[[int], bool]


class Telemetry:
    """One per driver: attaches to each SparkContext the script creates, journals what the
    listener saw, and says what happened in ``driver.ended``."""

    def __init__(self, rt: Runtime, mode: str = JVM, interval: float = 1.0):
        self.rt = rt
        self.mode = mode
        self.kind: str | None = None  # the listener in use, once attached
        self.dropped: int | None = None  # Spark's latest count of dropped listener events
        self._interval = interval if interval and interval > 0 else 1.0
        self._context: Any = None  # the JVM SparkContext (PySpark drops its handle at stop())
        self._drain: Drain | None = None
        self._await: Await | None = None
        self._wake: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()
        self._py4j_listener: Any = None

    # -- lifecycle ------------------------------------------------------------------------------

    def attach(self, sc: Any) -> None:
        """Start listening to this SparkContext (called right after the script created it)."""
        with self._lock:
            jsc = self._context = sc._jsc.sc()
            self.dropped = self.dropped or 0
            if self.mode == JVM:
                cls = find_class(sc._jvm, LISTENER_CLASS)
                if cls is not None and cls.instances() > 0:
                    self.kind = JVM
                    self._drain = lambda: _parse_lines(cls.drain(jsc))
                    self._await = lambda ms: bool(cls.awaitCoordinatorLines(ms))
                    self._wake = cls.wake
                else:
                    self._warn(
                        "jvm",
                        "the JVM listener is not registered in this driver (its jar is not "
                        "on the driver's classpath); using the slower Py4J listener",
                    )
                    self.mode = PY4J
            if self.mode == PY4J:
                from sparkrecover.driver.process import py4j_listener

                self._py4j_listener = py4j_listener.register(sc, self.rt)
                self.kind = PY4J
                self._drain = lambda: _dropped_record(jsc, self.dropped)
        self.start()

    def use(
        self, kind: str, drain: Drain, await_work: Await | None = None, wake: Callable[[], Any] | None = None
    ) -> None:
        """Journal what ``drain`` returns (for callers that registered a listener themselves);
        ``await_work`` and ``wake`` as the JVM listener's awaitCoordinatorLines and wake."""
        with self._lock:
            self.kind, self._drain, self._await, self._wake = kind, drain, await_work, wake

    def start(self) -> None:
        """Start the thread that drains every flush interval, and at once after finished work."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sparkrecover-listener-drain", daemon=True)
            self._thread.start()

    def sync(self, settle_ms: int = 0) -> int:
        """Journal everything the listener has handed over so far. ``settle_ms``: first let
        Spark's listener queues deliver what is already posted (at most that long), so a stage
        commit lists its jobs' last events: the bus delivers asynchronously, and on a loaded
        machine a job's end can still be queued when its action has returned. Returns how many
        lines the listener handed over."""
        if settle_ms and self._context is not None:
            _wait_for_listeners(self._context, settle_ms)
        with self._lock:
            if self._drain is None:
                return 0
            try:
                records = self._drain()
            except Exception as error:
                self._warn("drain", f"Spark listener events lost: {type(error).__name__}: {error}")
                return 0
            kept: dict[str, dict[str, Any]] = {}
            for record in records:
                if record.get("k") == _MAP_KEPT:
                    _batch_map(kept, record)
                else:
                    self._journal(record)
            for batch in kept.values():
                self.rt.writer.append(ev.SHUFFLE_COMMITTED, batch)
            return len(records)

    def close(self) -> dict[str, Any]:
        """Final drain; returns what ``driver.ended`` says about the listener."""
        self._stop.set()
        if self._wake is not None:
            try:
                self._wake()  # the drain thread may be waiting inside the JVM
            except Exception:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._context is not None:
            _wait_for_listeners(self._context)
        self.sync()
        if self._py4j_listener is not None:
            self._py4j_listener.closed = True
        return {"listener": self.kind, "spark_events_dropped": self.dropped}

    # -- internals ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            signalled = self._wait_for_work()
            if self._stop.is_set():
                return  # close() drains the rest
            drained = self.sync()
            if signalled:  # finished work: on storage now, not at the writer's next interval
                self.rt.writer.flush_soon()
                self._stop.wait(min(MAX_DRAIN_GAP, DRAIN_GAP_PER_LINE * max(1, drained)))

    def _wait_for_work(self) -> bool:
        """Wait one flush interval, or less when a line of finished work is waiting in the JVM;
        True in that case."""
        waiting = self._await
        if waiting is None:
            self._stop.wait(self._interval)
            return False
        try:
            return waiting(int(self._interval * 1000))
        except Exception as error:  # the JVM is going away, or a listener jar without the call
            self._await = None
            if not self._stop.is_set():
                self._warn(
                    "await",
                    f"the JVM listener cannot signal finished tasks ({type(error).__name__}); "
                    "journaling them every flush interval",
                )
            return False

    def _journal(self, record: dict[str, Any]) -> None:
        kind = record.pop("k", None)
        if kind == "listener.error":
            self._warn(kind, f"the JVM listener failed: {record.get('error')}")
            return
        event_type = _TYPES.get(kind)
        if event_type is None:
            return  # a newer listener's event this driver does not know: telemetry, skip it
        record.setdefault("stage", None)
        if event_type == ev.SPARK_EVENTS_DROPPED:
            self.dropped = int(record.get("dropped") or 0)
            self._warn(
                "dropped",
                f"Spark dropped {self.dropped} listener events (its listener queues were "
                "full); the journal's Spark telemetry is incomplete",
            )
        elif event_type == ev.SPARK_JOB_STARTED and record.get("job") is not None:
            self.rt.note_job(record["stage"], record["job"])
        self.rt.writer.append(event_type, record)

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            messages.say(f"sparkrecover: warning: {message}")


def _batch_map(batches: dict[str, dict[str, Any]], record: dict[str, Any]) -> None:
    """Add one kept map output to its shuffle's shuffle.committed payload of this drain."""
    identity = str(record.get("shuffle"))
    batch = batches.get(identity)
    if batch is None:
        batch = batches[identity] = {
            "shuffle": identity,
            "spark_shuffle": record.get("spark_shuffle"),
            "stage": record.get("stage"),
            "maps": [],
        }
    batch["maps"].append(
        {
            key: record.get(key)
            # keep_us: on the map task's thread; copy_us: the background copy; wait_us: for a copier
            for key in (
                "map",
                "path",
                "data_bytes",
                "index_bytes",
                "records",
                "row_bytes",
                "keep_us",
                "copy_us",
                "wait_us",
            )
        }
    )


def _parse_lines(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in text.splitlines() if line]


def dropped_counts(jsc: Any) -> dict[str, int]:
    """Spark's cumulative count of dropped listener events, per queue."""
    counters = jsc.listenerBus().metrics().metricRegistry().getCounters()
    counts = {}
    for name in list(counters.keySet()):
        if name.startswith("queue.") and name.endswith(".numDroppedEvents"):
            counts[name[len("queue.") : -len(".numDroppedEvents")]] = int(counters.get(name).getCount())
    return counts


def _dropped_record(jsc: Any, reported: int | None) -> list[dict[str, Any]]:
    """The Py4J fallback's equivalent of the JVM listener's events.dropped line."""
    counts = dropped_counts(jsc)
    total = sum(counts.values())
    if total == (reported or 0):
        return []
    return [{"k": "events.dropped", "dropped": total, "queues": counts}]


def _wait_for_listeners(jsc: Any, wait_ms: int = FINAL_WAIT_MS) -> None:
    """Let Spark's listener queues deliver what is already posted. A stopped context has done so
    already; a live one gets a bounded wait (telemetry: a queue still busy then is left as is)."""
    try:
        if not jsc.isStopped():
            jsc.listenerBus().waitUntilEmpty(wait_ms)
    except Exception:
        pass
