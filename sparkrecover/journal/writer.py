"""Buffered, thread-safe journal writer (DESIGN §5, rules 1 and 7 of §4).

Events are serialized at once and kept in a byte buffer that is flushed when it reaches
``buffer_size``, every ``flush_interval`` seconds (a daemon thread), and at once for urgent
events (``stage.committed``, ``*.ended``). On local disk a flush appends to the current segment
file and urgent flushes fsync it. Object stores have no append: there a flush rewrites the
current segment object whole, and the segment rolls over once it reaches ``object_segment_bytes``,
so a run makes at most ``total journal bytes / object_segment_bytes + 1`` objects per writer and
attempt.

Storage failures never propagate to the application: the pending bytes stay in memory (up to
``max_pending_bytes``), each later flush retries, and once a write succeeds again a
``journal.degraded`` event records the gap.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from sparkrecover import events, storage
from sparkrecover.journal.segments import segment_url

DEFAULT_BUFFER_SIZE = 1 << 20
DEFAULT_FLUSH_INTERVAL = 1.0
LOCAL_SEGMENT_BYTES = 64 << 20
OBJECT_SEGMENT_BYTES = 8 << 20
MAX_PENDING_BYTES = 64 << 20


class _LocalSink:
    """Appends to a segment file. A write that fails half-way is cut back off the file, so a
    retry never leaves a record twice; if even that fails, the writer moves on to a fresh
    segment (a torn line can then only be the last line of its segment, which readers drop, and
    readers also drop a repeated seq)."""

    def __init__(self, run_dir: str, attempt: int, writer: str, segment_bytes: int):
        self._args = (storage.normalize(run_dir), attempt, writer)
        self._segment_bytes = segment_bytes
        self._index = 0
        self._fd: int | None = None
        self._written = 0  # bytes of whole records in the current segment

    def write(self, data: bytes, durable: bool) -> None:
        if self._fd is None:
            path = segment_url(*self._args, self._index)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._written = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            if durable:
                os.fsync(self._fd)
        except BaseException:
            self._undo()
            raise
        self._written += len(data)
        if self._written >= self._segment_bytes:
            self._roll()

    def _undo(self) -> None:
        try:
            os.ftruncate(self._fd, self._written)
        except OSError:
            self._roll()

    def _roll(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = None
        self._index += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _ObjectSink:
    """Rewrites the current segment object whole on every flush (no append on object stores)."""

    def __init__(self, run_dir: str, attempt: int, writer: str, segment_bytes: int):
        self._args = (run_dir, attempt, writer)
        self._segment_bytes = segment_bytes
        self._index = 0
        self._content = bytearray()

    def write(self, data: bytes, durable: bool) -> None:
        candidate = bytes(self._content) + data
        fs, path = storage.filesystem(segment_url(*self._args, self._index))
        fs.pipe_file(path, candidate)
        self._content = bytearray(candidate)
        if len(self._content) >= self._segment_bytes:
            self._index += 1
            self._content = bytearray()

    def close(self) -> None:
        pass


class JournalWriter:
    def __init__(
        self,
        run_dir: str,
        run_id: str,
        attempt: int,
        writer: str,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        segment_bytes: int | None = None,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ):
        if writer not in events.WRITERS:
            raise ValueError(f"unknown journal writer {writer!r}")
        self.run_dir = run_dir
        self.run_id = run_id
        self.attempt = attempt
        self.writer = writer
        self._buffer_size = buffer_size
        self._max_pending = max_pending_bytes
        if storage.is_local(run_dir):
            self._sink: Any = _LocalSink(run_dir, attempt, writer, segment_bytes or LOCAL_SEGMENT_BYTES)
        else:
            self._sink = _ObjectSink(run_dir, attempt, writer, segment_bytes or OBJECT_SEGMENT_BYTES)
        self._buffer = bytearray()
        self._seq = 0
        self._lock = threading.RLock()
        self._closed = False
        self._degraded_since: str | None = None
        self._degraded_error = ""
        self._dropped_bytes = 0
        self.warnings: list[str] = []
        self._ts_ms = -1
        self._ts_text = ""
        self._stop = threading.Event()
        self._flusher = None
        if flush_interval and flush_interval > 0:
            self._flusher = threading.Thread(
                target=self._flush_periodically, args=(flush_interval,),
                name="sparkrecover-journal-flush", daemon=True,
            )
            self._flusher.start()

    # -- writing ------------------------------------------------------------------------------

    def emit(self, event_type: str, **payload: Any) -> dict[str, Any]:
        """Append one event; returns the full record as written."""
        with self._lock:
            record = {
                "v": events.SCHEMA_VERSION,
                "type": event_type,
                "run": self.run_id,
                "attempt": self.attempt,
                "writer": self.writer,
                "seq": self._seq,
                "ts": self._timestamp(),
            }
            record.update(payload)
            line = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS, default=str)
            self._seq += 1
            if self._closed:
                return record
            self._buffer += line
            self._buffer += b"\n"
            if event_type in events.URGENT_TYPES:
                self._flush_locked(durable=True)
            elif len(self._buffer) >= self._buffer_size:
                self._flush_locked(durable=False)
            return record

    def flush(self, durable: bool = True) -> bool:
        """Write what is buffered. Returns False when storage refused it (it stays buffered)."""
        with self._lock:
            return self._flush_locked(durable)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._flush_locked(durable=True)
            self._closed = True
            try:
                self._sink.close()
            except OSError:
                pass

    @property
    def degraded(self) -> bool:
        return self._degraded_since is not None

    # -- internals ----------------------------------------------------------------------------

    def _timestamp(self) -> str:
        # Formatting a datetime costs more than the rest of emit(); reuse it within a millisecond.
        now = time.time()
        ms = int(now * 1000)
        if ms != self._ts_ms:
            self._ts_ms = ms
            stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
            self._ts_text = stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
        return self._ts_text

    def _flush_locked(self, durable: bool) -> bool:
        if not self._buffer or self._closed:
            return True
        data = bytes(self._buffer)
        try:
            self._sink.write(data, durable)
        except Exception as error:  # any storage failure: rule 7, the journal never kills the job
            self._note_failure(error)
            return False
        self._buffer.clear()
        if self._degraded_since is not None:
            self._record_recovery()
        return True

    def _note_failure(self, error: Exception) -> None:
        if self._degraded_since is None:
            self._degraded_since = self._timestamp()
            self._degraded_error = f"{type(error).__name__}: {error}"
            self._warn(f"journal storage failed ({self._degraded_error}); buffering and retrying")
        if len(self._buffer) > self._max_pending:
            # Keep the newest complete lines: losing old telemetry is safe, a lost commit record
            # only makes resume rerun that stage (never the other way round).
            overflow = len(self._buffer) - self._max_pending
            cut = self._buffer.find(b"\n", overflow) + 1
            self._dropped_bytes += cut
            del self._buffer[:cut]

    def _record_recovery(self) -> None:
        since, error, dropped = self._degraded_since, self._degraded_error, self._dropped_bytes
        self._degraded_since, self._dropped_bytes = None, 0
        self.emit(events.JOURNAL_DEGRADED, since=since, until=self._timestamp(), error=error,
                  dropped_bytes=dropped)
        self._flush_locked(durable=True)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        print(f"sparkrecover: warning: {message}", file=sys.stderr, flush=True)

    def _flush_periodically(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with self._lock:
                if not self._closed:
                    self._flush_locked(durable=False)
