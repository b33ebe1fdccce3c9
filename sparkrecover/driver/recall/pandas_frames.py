"""``toPandas()`` recorded and replayed (docs/replay.md) by what pyspark's own ``toPandas`` builds
its frame from, so the replayed frame is the one a live call returns, dtypes and cell types included:

- without Arrow, the rows of its inner ``collect()``: kept as ``collect``'s are (typed JSON along
  the schema) and handed back to that ``collect`` on replay;
- through Arrow (``spark.sql.execution.arrow.pyspark.enabled``, on by default since Spark 4), the
  Arrow record batches its inner ``_collect_as_arrow()`` returns: kept as an Arrow IPC stream (data
  with its schema, never a pickle) and handed back to that call on replay, pyspark converting them
  as it converts the batches Spark sends.

Which of the two produced a record is part of its fingerprint (``code``): a record of one path is
not replayed on the other. The inner calls are fed through a thread-local: only the ``toPandas``
being recorded or replayed on this thread sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.driver.recall import codec, recorder
from sparkrecover.driver.recording import hooks

ARROW_CONF = "spark.sql.execution.arrow.pyspark.enabled"
_LARGE_TYPES_CONF = "spark.sql.execution.arrow.useLargeVarTypes"  # changes the batches' types
_local = threading.local()
_frame: Any = None  # the DataFrame class whose toPandas is pyspark's (install)


@dataclass
class Feed:
    """What the inner calls of one ``toPandas`` get (replay) or hand up (record)."""

    capture: bool
    limit: int = 0
    rows: list[Any] = field(default_factory=list)  # collect's rows
    batches: list[Any] = field(default_factory=list)  # _collect_as_arrow's record batches
    collected: bool = False  # capture: the rows path ran
    # capture: the Arrow path's batches, encoded, or why they are not kept (over the limit, unencodable)
    arrow: recorder.Encoded | recorder.OverLimit | codec.Unrecordable | None = None

    def kept(self) -> recorder.Encoded:
        """The encoded batches, for the recorder (which journals why, when this raises)."""
        if isinstance(self.arrow, Exception):
            raise self.arrow
        assert self.arrow is not None
        return self.arrow


def install(frame: type) -> None:
    global _frame
    _frame = frame
    if hasattr(frame, "_collect_as_arrow"):
        hooks.patch(frame, "_collect_as_arrow", _fed_batches)


def arrow_enabled(frame: Any) -> bool:
    # No default given: Spark then answers the setting's own default (true since Spark 4), where a
    # default given would be answered for a setting left unset.
    return str(frame.sparkSession.conf.get(ARROW_CONF)).lower() == "true"


def code(frame: Any) -> list[str]:
    """What the frame depends on besides the rows, for the action's fingerprint: the path pyspark
    takes (Arrow, and its large types, or rows), so a record of the other path runs again (``code
    changed``). A record made before this was in the fingerprint (rows only) is not compared."""
    if not arrow_enabled(frame):
        return ["rows"]
    return [f"arrow, {_LARGE_TYPES_CONF}={frame.sparkSession.conf.get(_LARGE_TYPES_CONF)}"]


def feeding() -> bool:
    return getattr(_local, "feed", None) is not None


def fed_rows(frame: Any, original: Any) -> Any:
    """``collect`` inside the ``toPandas`` being recorded or replayed."""
    feed: Feed = _local.feed
    _local.feed = None  # one inner call per toPandas
    if not feed.capture:
        return feed.rows
    found = original(frame)
    feed.rows.extend(found)
    feed.collected = True
    return found


def _fed_batches(original: Any) -> Any:
    def collect_as_arrow(self: Any, *args: Any, **kwargs: Any) -> Any:
        feed: Feed | None = getattr(_local, "feed", None)
        if feed is None:
            return original(self, *args, **kwargs)
        _local.feed = None
        if not feed.capture:
            return feed.batches
        found = original(self, *args, **kwargs)
        # Encoded before pyspark converts them: with selfDestruct its conversion frees them.
        try:
            feed.arrow = encode_batches(found, feed.limit)
        except recorder.OverLimit as over:
            feed.arrow = over
        except Exception as error:  # never the script's toPandas: the record says why instead
            feed.arrow = codec.Unrecordable(f"its Arrow batches ({type(error).__name__}: {error})")
        return found

    return collect_as_arrow


def encode_batches(batches: list[Any], limit: int) -> recorder.Encoded:
    """The batches as one Arrow IPC stream (their schema first; none for no batch), stopped as soon
    as it passes ``limit``."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema if batches else pa.schema([])) as stream:
        for batch in batches:
            stream.write_batch(batch)
            if sink.tell() > limit:
                raise recorder.over_limit(sink.tell(), limit, at_least=batch is not batches[-1])
    data = sink.getvalue().to_pybytes()
    if len(data) > limit:
        raise recorder.over_limit(len(data), limit)
    return recorder.Encoded(data, sum(batch.num_rows for batch in batches), recorder.ARROW_SUFFIX)


def decode_batches(data: bytes) -> list[Any]:
    import pyarrow as pa

    return list(pa.ipc.open_stream(pa.py_buffer(data)))


def live(run: Callable[[], Any], limit: int) -> tuple[Any, Feed]:
    """pyspark's toPandas run, what its inner call returned kept in the feed."""
    feed = Feed(capture=True, limit=limit)
    _local.feed = feed
    try:
        return run(), feed
    finally:
        _local.feed = None


def replay(frame: Any, shape: str, value: Any) -> Any:
    """The frame pyspark's toPandas builds from a recorded result (rows or Arrow batches)."""
    if shape == recorder.ARROW:
        return _fed(Feed(capture=False, batches=decode_batches(value)), lambda: _frame.toPandas.__wrapped__(frame))
    return _fed(Feed(capture=False, rows=value), lambda: _without_arrow(frame))


def _fed(feed: Feed, make: Callable[[], Any]) -> Any:
    _local.feed = feed
    try:
        return make()
    finally:
        _local.feed = None


def _without_arrow(frame: Any) -> Any:
    """pyspark's toPandas from the fed rows: rows were recorded where Arrow was off, or where
    pyspark fell back from it (a schema Arrow cannot take), so its rows path is the one to take."""
    conf = frame.sparkSession.conf
    before = conf.get(ARROW_CONF, None)
    conf.set(ARROW_CONF, "false")
    try:
        return _frame.toPandas.__wrapped__(frame)
    finally:
        if before is None:
            conf.unset(ARROW_CONF)
        else:
            conf.set(ARROW_CONF, before)
