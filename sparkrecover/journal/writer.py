"""Buffered, thread-safe journal writer (docs/design.md §5, §4 rules 1 and 7).

Events are serialized at once and kept in a byte buffer that is flushed when it reaches
``buffer_size``, every ``flush_interval`` seconds (a daemon thread), and at once for urgent
events (``stage.committed``, ``*.ended``). Where the bytes go, and how many objects a run makes
on an object store, is the sinks' business (``sinks.py``).

Storage failures never propagate to the application (§4 rule 7). The pending bytes stay in memory
(up to ``max_pending_bytes``, see ``pending.py``); retries back off exponentially from
``retry_initial`` to ``retry_max`` seconds so a dead endpoint is not hit on every flush; while
storage is failing only the background thread retries, so the application never waits on it;
once a write succeeds again a ``journal.degraded`` event records the gap and what was lost.

When a flusher thread runs (``flush_interval`` > 0), a full buffer is handed to it instead of
being written by the thread that emitted the event: an upload to an object store takes
milliseconds to seconds, and meanwhile the application goes on filling a fresh buffer. If it
fills ``backlog_size`` bytes before the upload finishes, emit waits for the flusher
(backpressure: memory stays bounded and nothing is lost while storage is healthy), but never
longer than ``BACKPRESSURE_MAX_WAIT`` seconds per upload and never while storage is failing:
a hung or failing endpoint must not stall the job (§4 rule 7), and past that the memory cap
applies. Urgent events are still written before emit returns.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from sparkrecover.journal import events
from sparkrecover.journal.events import SCHEMA_VERSION, URGENT_TYPES
from sparkrecover.journal.pending import Dropped, enforce_cap
from sparkrecover.journal.sinks import LocalSink, ObjectSink
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run

DEFAULT_BUFFER_SIZE = 1 << 20
DEFAULT_FLUSH_INTERVAL = 1.0
MAX_PENDING_BYTES = 64 << 20
# Bytes emit may buffer while the flusher uploads before it waits: a few buffers' worth, so the
# application rarely waits, and far below the memory cap, which is for failing storage.
BACKLOG_BUFFERS = 8
MIN_BACKLOG = 1 << 20
BACKPRESSURE_MAX_WAIT = 5.0
RETRY_INITIAL = 0.5
RETRY_MAX = 30.0
CLOSE_TIMEOUT = 10.0


class JournalWriter:
    def __init__(
        self,
        run: Run,
        attempt: int,
        writer: str,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        segment_bytes: int | None = None,
        segment_age: float | None = None,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        backlog_size: int | None = None,
        retry_initial: float = RETRY_INITIAL,
        retry_max: float = RETRY_MAX,
        close_timeout: float = CLOSE_TIMEOUT,
    ):
        if writer not in events.WRITERS:
            raise ValueError(f"unknown journal writer {writer!r}")
        self.run = run
        self.attempt = attempt
        self.writer = writer
        self._max_pending = max_pending_bytes
        # emit looks at one number after appending: the buffer is full, or over the cap
        self._full_at = min(buffer_size, max_pending_bytes + 1)
        self._backlog = backlog_size or min(
            max(buffer_size * BACKLOG_BUFFERS, MIN_BACKLOG), max(max_pending_bytes // 2, 1)
        )
        self._retry = (retry_initial, retry_max)
        self._close_timeout = close_timeout
        if storage.is_local(run.dir):
            self._sink: Any = LocalSink(run.dir, attempt, writer, segment_bytes)
        else:
            self._sink = ObjectSink(run.dir, attempt, writer, segment_bytes, segment_age)
        self._buffer = bytearray()
        self._seq = 0
        self._lock = threading.RLock()  # the buffer and seq: held for microseconds
        self._drained = threading.Condition(self._lock)  # the flusher took the buffer (backpressure)
        self._io_lock = threading.Lock()  # one sink write at a time, in buffer order
        self._closed = False
        self._stalled = False  # a backpressure wait timed out: no more waits until a write lands
        self._degraded_since: str | None = None
        self._degraded_error = ""
        self._retry_at = 0.0
        self._backoff = 0.0
        self._dropped = Dropped()
        self.warnings: list[str] = []
        self._ts_ms = -1
        self._ts_text = ""
        self._ts_seen = ""  # append's cache of the timestamp as JSON bytes
        self._ts_json = b'""'
        self._prefixes: dict[str, bytes] = {}  # event type -> the envelope up to "seq":
        self._stop = threading.Event()
        self._wake = threading.Event()  # a full buffer for the flusher, before its interval ends
        self._flusher = None
        if flush_interval and flush_interval > 0:
            self._flusher = threading.Thread(
                target=self._flush_periodically,
                args=(flush_interval,),
                name="sparkrecover-journal-flush",
                daemon=True,
            )
            self._flusher.start()

    # -- writing ------------------------------------------------------------------------------

    def emit(self, event_type: str, /, **payload: Any) -> dict[str, Any]:
        """Append one event; returns the full record as written.

        Payload keys must not repeat the envelope's (``v``, ``type``, ``run``, ``attempt``,
        ``writer``, ``seq``, ``ts``)."""
        # _append, inlined: this runs for every pipeline event, and a call costs a tenth of it.
        with self._lock:
            record = {
                "v": SCHEMA_VERSION,
                "type": event_type,
                "run": self.run.id,
                "attempt": self.attempt,
                "writer": self.writer,
                "seq": self._seq,
                "ts": self._timestamp(),
                **payload,
            }
            try:
                line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
            except orjson.JSONEncodeError:
                line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS, default=str)
            self._seq += 1
            if self._closed:
                return record
            buffer = self._buffer
            buffer += line
            size = len(buffer)
        if size >= self._full_at or event_type in URGENT_TYPES:
            self._after_append(event_type in URGENT_TYPES)
        return record

    def append(self, event_type: str, payload: dict[str, Any]) -> None:
        """emit() for a payload the caller already holds in a dict, when no record is wanted back:
        the listener bridge's path for every Spark event. It writes the same bytes as emit(), but
        from a cached envelope prefix and the payload alone, without building the record."""
        try:
            body = orjson.dumps(payload)
        except orjson.JSONEncodeError:
            body = orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS, default=str)
        with self._lock:
            prefix = self._prefixes.get(event_type) or self._prefix(event_type)
            stamp = self._timestamp()
            if stamp is not self._ts_seen:  # a new millisecond: serialize it once
                self._ts_seen, self._ts_json = stamp, orjson.dumps(stamp)
            seq = self._seq
            self._seq = seq + 1
            if self._closed:
                return
            buffer = self._buffer
            # body[1:] drops the payload's "{"; an empty payload is just "}"
            buffer += b'%b%d,"ts":%b%b%b\n' % (prefix, seq, self._ts_json, b"," if len(body) > 2 else b"", body[1:])
            size = len(buffer)
        if size >= self._full_at or event_type in URGENT_TYPES:
            self._after_append(event_type in URGENT_TYPES)

    def flush(self, durable: bool = True) -> bool:
        """Write what is buffered. Returns False when storage refused it (it stays buffered)."""
        return self._flush(durable)

    def flush_soon(self) -> None:
        """Write what is buffered without waiting for the interval, on the flusher's thread (or
        here when there is none), not durably: a record of finished work then survives the
        process being killed a moment later. While storage is failing the flusher's retry
        schedule stands."""
        if self._flusher is None:
            self._flush(durable=False)
        elif self._degraded_since is None:
            self._wake.set()

    def close(self) -> None:
        """Flush, retrying for up to ``close_timeout`` seconds if storage is failing, then compact."""
        self._stop.set()
        self._wake.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=self._close_timeout)
        with self._lock:
            if self._closed:
                return
        deadline = time.monotonic() + self._close_timeout
        pause = 0.1
        written = self._flush(durable=True, force=True)
        while not written and time.monotonic() + pause < deadline:
            time.sleep(pause)  # the process is about to end: retry sooner than the usual backoff
            pause = min(pause * 2, 2.0)
            written = self._flush(durable=True, force=True)
        with self._lock:
            self._closed = True
            lost = len(self._buffer)
            self._drained.notify_all()
        if not written:
            self._warn(
                f"journal storage still failing when the writer closed; {lost} bytes of journal were not written"
            )
        try:
            self._sink.close(compact=written)
        except Exception:
            pass

    @property
    def degraded(self) -> bool:
        return self._degraded_since is not None

    # -- internals ----------------------------------------------------------------------------

    def _after_append(self, urgent: bool) -> None:
        """The buffer is full (or over the cap), or the event must be on storage before emit
        returns: cap it, then write it here, or hand it to the flusher and maybe wait for it."""
        with self._lock:
            if len(self._buffer) > self._max_pending:
                enforce_cap(self._buffer, self._max_pending, self._dropped)
        if urgent or self._flusher is None:
            self._flush(durable=urgent)
        elif self._degraded_since is None:  # when failing, the flusher retries on its own schedule
            self._wake.set()
            if len(self._buffer) >= self._backlog and not self._stalled:
                self._wait_for_flusher()

    def _wait_for_flusher(self) -> None:
        """Backpressure: wait until the flusher takes the buffer, storage fails, or the writer
        closes, for at most BACKPRESSURE_MAX_WAIT seconds (then stop waiting until a write lands)."""
        deadline = time.monotonic() + BACKPRESSURE_MAX_WAIT
        with self._drained:
            while len(self._buffer) >= self._backlog and self._degraded_since is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._stalled = True
                    return
                self._drained.wait(left)

    def _prefix(self, event_type: str) -> bytes:
        """The serialized envelope of this writer's events of one type, up to the seq's value."""
        prefix = b'{"v":%d,"type":%b,"run":%b,"attempt":%b,"writer":%b,"seq":' % (
            SCHEMA_VERSION,
            orjson.dumps(event_type),
            orjson.dumps(self.run.id),
            orjson.dumps(self.attempt),
            orjson.dumps(self.writer),
        )
        self._prefixes[event_type] = prefix
        return prefix

    def _append(self, event_type: str, payload: dict[str, Any], capped: bool = True) -> dict[str, Any]:
        record = {
            "v": events.SCHEMA_VERSION,
            "type": event_type,
            "run": self.run.id,
            "attempt": self.attempt,
            "writer": self.writer,
            "seq": self._seq,
            "ts": self._timestamp(),
        }
        record.update(payload)
        try:
            line = orjson.dumps(record)  # the plain call is ~3x faster than with the options below
        except orjson.JSONEncodeError:  # a non-string key or an object orjson does not know
            line = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS, default=str)
        self._seq += 1
        if not self._closed:
            self._buffer += line
            self._buffer += b"\n"
            if capped and len(self._buffer) > self._max_pending:
                enforce_cap(self._buffer, self._max_pending, self._dropped)
        return record

    def _timestamp(self) -> str:
        # Formatting a datetime costs more than the rest of emit(); reuse it within a millisecond.
        now = time.time()
        ms = int(now * 1000)
        if ms != self._ts_ms:
            self._ts_ms = ms
            stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
            self._ts_text = stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
        return self._ts_text

    def _flush(self, durable: bool, *, background: bool = False, force: bool = False) -> bool:
        if self._degraded_since is not None and not force:
            if self._flusher is not None and not background:
                return False  # storage is failing: the flusher thread retries, the application goes on
            if time.monotonic() < self._retry_at:
                return False  # backing off: do not hammer a dead endpoint on every flush
        with self._io_lock:
            if self._closed:
                return not self._buffer
            if not self._write_pending(durable):
                return False
            if self._degraded_since is None:
                return True
            self._append_degraded()
            return self._write_pending(durable=True)

    def _write_pending(self, durable: bool) -> bool:
        """Hand the buffer to the sink; on failure put it back in front of what came meanwhile."""
        with self._lock:
            if not self._buffer:
                return True
            data, self._buffer = self._buffer, bytearray()  # emit goes on filling a fresh one
            self._drained.notify_all()
        try:
            self._sink.write(data, durable)
        except Exception as error:  # any storage failure: §4 rule 7, the journal never kills the job
            with self._lock:
                self._buffer[0:0] = data
                self._note_failure(error)
                self._drained.notify_all()  # backpressure waits end: storage is failing
            return False
        self._stalled = False
        return True

    def _note_failure(self, error: Exception) -> None:
        initial, ceiling = self._retry
        if self._degraded_since is None:
            self._degraded_since = self._timestamp()
            self._degraded_error = f"{type(error).__name__}: {error}"[:1000]
            self._backoff = initial
            self._warn(f"journal storage failed ({self._degraded_error}); buffering and retrying")
        else:
            self._backoff = min(self._backoff * 2, ceiling)
        self._retry_at = time.monotonic() + self._backoff
        enforce_cap(self._buffer, self._max_pending, self._dropped)

    def _append_degraded(self) -> None:
        with self._lock:
            since, error, dropped = self._degraded_since, self._degraded_error, self._dropped
            self._degraded_since, self._backoff, self._dropped = None, 0.0, Dropped()
            self._append(
                events.JOURNAL_DEGRADED,
                {"since": since, "until": self._timestamp(), "error": error, **dropped.payload()},
                capped=False,
            )  # the record of what was lost is the one line never to lose

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        print(f"sparkrecover: warning: {message}", file=sys.stderr, flush=True)

    def _flush_periodically(self, interval: float) -> None:
        while not self._stop.is_set():
            self._wake.wait(interval)  # the interval, or less when emit hands over a full buffer
            self._wake.clear()
            if self._stop.is_set():
                return  # close() writes the rest
            self._flush(durable=False, background=True)
