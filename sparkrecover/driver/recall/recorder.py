"""Result files (``rundir/results.py``: ``<run dir>/results/<attempt>/<n>.json``), one per recorded action.

A result is encoded (``codec``), sealed by the SHA-256 of its bytes, written to the run's storage,
and journaled (``action.recorded``, with the digest) only once the file is durable: a driver that
dies in between leaves a file no record names, and the action simply runs again. Files are written
on one background thread, so an action returns to the script as soon as Spark returned it; the
driver waits for the queue before its ``driver.ended`` (``Recorder.close``).

A result over the size limit (``spark.sparkrecover.results.maxBytes``, default 8 MiB) is not kept:
its encoding stops as soon as it passes the limit, and the record says why, so the plan can say
the action runs again.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sparkrecover.driver.process import messages
from sparkrecover.driver.recall import codec
from sparkrecover.journal import events as ev
from sparkrecover.rundir import results, storage

DEFAULT_LIMIT = 8 << 20
LIMIT_CONF = "spark.sparkrecover.results.maxBytes"
# Rows are encoded in chunks, so a result far over the limit costs about the limit's worth of work.
_CHUNK = 2000
FORMAT = 1

# The shapes of results: rows of the DataFrame's schema, one row or None, a plain value, the text
# ``show`` printed; and the Arrow record batches of a ``toPandas`` through Arrow, kept as an Arrow
# IPC stream in a file of its own suffix (``pandas_frames``).
ROWS, ROW, VALUE, TEXT, ARROW = "rows", "row", "value", "text", "arrow"
ARROW_SUFFIX = "arrow"


class OverLimit(Exception):
    pass


@dataclass
class Encoded:
    data: bytes
    rows: int | None
    suffix: str = "json"  # the result file's: typed JSON, or an Arrow IPC stream


def encode(shape: str, result: Any, schema: Any, limit: int) -> Encoded:
    """The result file's bytes; ``OverLimit`` or ``codec.Unrecordable`` when it is not kept. A
    ``VALUE`` comes already encoded (``codec.encode_value``): the driver encodes it before the
    action returns, while it is still what the action returned."""
    document: dict[str, Any] = {"v": FORMAT, "shape": shape}
    rows: int | None = None
    if shape in (ROWS, ROW):
        document["schema"] = schema.jsonValue()
        listed = list(result) if shape == ROWS else ([] if result is None else [result])
        document["data"] = _rows_within(listed, schema, limit)
        rows = len(listed)
        if shape == ROW:
            document["data"] = document["data"][0] if listed else None
    elif shape == TEXT:
        document["data"] = str(result)
    else:
        document["data"] = result
    data = orjson.dumps(document)
    if len(data) > limit:
        raise over_limit(len(data), limit)
    return Encoded(data, rows)


def over_limit(size: int, limit: int, at_least: bool = False) -> OverLimit:
    """Why a result of ``size`` bytes (or more, ``at_least``: its encoding stopped there) is not kept."""
    from sparkrecover.core import humanize

    more = "more than " if at_least else ""
    return OverLimit(
        f"result of {more}{humanize.size(size)} over the {humanize.size(limit)} limit ({LIMIT_CONF}): "
        "runs again on resume"
    )


def _rows_within(rows: list[Any], schema: Any, limit: int) -> list[list[Any]]:
    encode_row, _ = codec.row_codec(schema)
    encoded: list[list[Any]] = []
    size = 0
    for start in range(0, len(rows), _CHUNK):
        chunk = [encode_row(row) for row in rows[start : start + _CHUNK]]
        size += len(orjson.dumps(chunk))
        if size > limit:
            raise over_limit(size, limit, at_least=start + _CHUNK < len(rows))
        encoded += chunk
    return encoded


def decode(data: bytes, sha256: str, where: str) -> tuple[str, Any]:
    """(shape, the result as the action returned it) from a result file's bytes, checked against
    the digest its record sealed it with."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{where} does not match the digest recorded with it")
    if where.endswith(f".{ARROW_SUFFIX}"):
        return ARROW, data  # an Arrow IPC stream: pyarrow reads it where it is used (pandas_frames)
    document = orjson.loads(data)
    if document.get("v") != FORMAT:
        raise ValueError(f"{where}: result format {document.get('v')!r} unknown")
    shape, payload = document["shape"], document["data"]
    if shape in (ROWS, ROW):
        from pyspark.sql.types import StructType

        schema = StructType.fromJson(document["schema"])
        rows = codec.decode_rows(payload if shape == ROWS else ([] if payload is None else [payload]), schema)
        return shape, rows if shape == ROWS else (rows[0] if rows else None)
    if shape == TEXT:
        return shape, str(payload)
    return shape, codec.decode_value(payload)


class Recorder:
    """Writes result files on one background thread and journals each once it is durable."""

    def __init__(self, writer: Any, run_dir: str, attempt: int):
        self.writer, self.run_dir, self.attempt = writer, run_dir, attempt
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._count = 0
        self._lock = threading.Lock()

    def record(self, payload: dict[str, Any], make: Callable[[], Encoded] | None) -> None:
        """Journal ``payload`` as ``action.recorded``, with the result ``make`` encodes written
        first (None: nothing to keep, the payload says why)."""
        with self._lock:
            self._count += 1
            number = self._count
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="sparkrecover-results", daemon=True)
                self._thread.start()
        self._queue.put(lambda: self._keep(number, payload, make))

    def _keep(self, number: int, payload: dict[str, Any], make: Callable[[], Encoded] | None) -> None:
        result = None
        if make is not None:
            try:
                encoded = make()
            except (OverLimit, codec.Unrecordable) as why:
                payload["not_kept"] = str(why) if isinstance(why, OverLimit) else f"{why} cannot be kept"
            else:
                path = results.path_of(self.attempt, number, encoded.suffix)
                storage.write_atomic(results.url_of(self.run_dir, path), encoded.data)
                result = {"path": path, "sha256": hashlib.sha256(encoded.data).hexdigest(), "bytes": len(encoded.data)}
                if encoded.rows is not None:
                    result["rows"] = encoded.rows
        self.writer.emit(ev.ACTION_RECORDED, result=result, **payload)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except Exception as error:  # a result not kept costs its recomputation, never the job
                messages.say(f"sparkrecover: warning: an action's result not kept: {error}")

    def close(self, timeout: float = 60.0) -> None:
        """Wait for the results queued so far (at the driver's end)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
