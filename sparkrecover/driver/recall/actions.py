"""Spark actions recorded and replayed (docs/replay.md): a resumed driver runs the script from the
top, and every action an earlier attempt finished hands back that attempt's result without a Spark
job — ``show`` prints what it printed — so the resume pays only for unfinished work and takes the
same branches as the attempt whose writes it skips.

``install`` patches the actions of pyspark's DataFrame and RDD through the one patch table
(``driver/hooks.py``). A patched action is pyspark's own when no runtime is installed, when the
run turned replay off, and when its caller is pyspark or sparkrecover (``first`` calls ``take``:
only the user's call is an action here). Otherwise:

1. the action is identified (``identity``: call site, ordinal, arguments, fingerprint);
2. when the plan offers its result and the fingerprint is unchanged, the result file is read,
   checked against its digest and decoded (``results``), ``action.replayed`` is journaled and the
   value returned;
3. else pyspark's action runs, and its result is queued to be kept (``results.Recorder``), the
   record saying why it ran (no record, ``plan changed``, ``input changed``, over the limit).

Nothing here may break the user's action: a failure of ours is a warning (once) and the action as
pyspark runs it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.lifecycle import fingerprints
from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recall import codec, identity, pandas_frames, recorder
from sparkrecover.driver.recording import hooks, zerocode
from sparkrecover.journal import events as ev
from sparkrecover.rundir import results, storage
from sparkrecover.rundir.plans import ActionEntry


@dataclass(frozen=True)
class Kind:
    name: str
    shape: str  # recorder.ROWS, ROW, VALUE or TEXT


# DataFrame actions, by the shape of what they return. ``head`` returns a row or rows by its argument.
FRAME_ACTIONS = {
    "collect": recorder.ROWS,
    "take": recorder.ROWS,
    "tail": recorder.ROWS,
    "head": recorder.ROWS,
    "first": recorder.ROW,
    "count": recorder.VALUE,
    "isEmpty": recorder.VALUE,
    "show": recorder.TEXT,
    "toLocalIterator": recorder.ROWS,
    "toPandas": recorder.ROWS,
}
RDD_ACTIONS = (
    "count",
    "collect",
    "take",
    "first",
    "reduce",
    "fold",
    "aggregate",
    "treeReduce",
    "treeAggregate",
    "sum",
    "mean",
    "variance",
    "stdev",
    "sampleVariance",
    "sampleStdev",
    "stats",
    "countByKey",
    "countByValue",
    "max",
    "min",
    "top",
    "takeOrdered",
    "collectAsMap",
    "isEmpty",
)
_warned = False


def frame_class() -> Any:
    """The class whose methods run a DataFrame's actions: classic's in pyspark 4, the one in 3.5."""
    import importlib

    try:
        return importlib.import_module("pyspark.sql.classic.dataframe").DataFrame
    except ImportError:
        return importlib.import_module("pyspark.sql").DataFrame


def install() -> None:
    global _warned
    from pyspark import RDD

    _warned = False
    frame = frame_class()
    for name, shape in FRAME_ACTIONS.items():
        if hasattr(frame, name):
            hooks.patch(frame, name, functools.partial(_action, Kind(name, shape), _frame_source))
    pandas_frames.install(frame)
    for name in RDD_ACTIONS:
        if hasattr(RDD, name):
            hooks.patch(RDD, name, functools.partial(_action, Kind(f"rdd.{name}", recorder.VALUE), _rdd_source))


def _frame_source(frame: Any) -> Any:
    return frame


def _rdd_source(rdd: Any) -> Any:
    return zerocode.RDDSource(rdd)


def warn(what: str, error: BaseException) -> None:
    global _warned
    if not _warned:
        _warned = True
        messages.say(
            f"sparkrecover: warning: {what}: {type(error).__name__}: {error} (actions run as pyspark's)",
        )


def _ours(module: str) -> bool:
    return zerocode.is_own_module(module)


def _action(kind: Kind, source_of: Callable[[Any], Any], original: Any) -> Any:
    signature = inspect.signature(original)

    def action(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kind.name == "collect" and pandas_frames.feeding():
            return pandas_frames.fed_rows(self, original)  # toPandas' own collect, replayed or recorded

        def live() -> Any:
            if kind.name.startswith("rdd."):
                return _at_user_site(self.context, kind.name.removeprefix("rdd."), original, self, *args, **kwargs)
            return original(self, *args, **kwargs)

        rt = runtime.current()
        if rt is None or rt.recorder is None or _ours(str(sys._getframe(1).f_globals.get("__name__") or "")):
            return live()
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments, code = _arguments(bound.arguments)
            if kind.name == "toPandas":
                code += pandas_frames.code(self)
            call = identity.identify(rt, kind.name, arguments, source_of(self), code)
            shape = recorder.ROW if kind.name == "head" and bound.arguments.get("n") is None else kind.shape
        except Exception as error:
            warn(f"{kind.name}() not checked for replay", error)
            return live()
        return Call(rt, kind, call, shape, self).run(live)

    return action


def _at_user_site(context: Any, name: str, original: Any, *args: Any, **kwargs: Any) -> Any:
    """An RDD action, its job named after the user's call (``reduce at etl.py:12``) as pyspark
    names it: pyspark takes the first frame outside its own package, which would be this module.
    Its own mechanism (``SCCallSiteSync``) is used: a call site set at depth 0 holds for the calls
    inside."""
    from pyspark.traceback_utils import SCCallSiteSync

    filename, line = zerocode.call_site()
    outermost = SCCallSiteSync._spark_stack_depth == 0
    if outermost:
        context._jsc.setCallSite(f"{name} at {filename}:{line}")
    SCCallSiteSync._spark_stack_depth += 1
    try:
        return original(*args, **kwargs)
    finally:
        SCCallSiteSync._spark_stack_depth -= 1
        if outermost:
            context._jsc.setCallSite(None)


def _arguments(bound: dict[str, Any]) -> tuple[str, list[str]]:
    """The arguments as the key shows them (functions by name: their code joins the fingerprint)."""
    shown, code = [], []
    for name, value in list(bound.items())[1:]:
        if value is None or isinstance(value, (bool, int, float, str)):
            shown.append(f"{name}={value!r}")
        elif callable(value):
            shown.append(f"{name}=<function>")
            code.append(fingerprints.codedigest(value) or "")
        else:
            shown.append(f"{name}=<{type(value).__name__}>")
            code.append(staleness.digest(repr(value)) if isinstance(value, (list, tuple, dict)) else "")
    return ", ".join(shown), code


def offered(rt: runtime.Runtime, action: identity.Action) -> tuple[ActionEntry | None, str]:
    """What the plan offers for ``action``: its record, when it is to be replayed (and ``""``), or
    None and the reason it runs (``no record``, the plan's reason, what changed since)."""
    entry = rt.results.get(action.key)
    if entry is None:
        return None, "no record"
    if not entry.replay:
        return None, entry.reason
    changed = staleness.difference(entry.fingerprint, action.fingerprint)
    return (None, changed) if changed else (entry, "")


def journal_replayed(
    rt: runtime.Runtime, action: identity.Action, entry: ActionEntry, started: float, **details: Any
) -> None:
    """``action.replayed``: the record handed back instead of a Spark job (since ``started``)."""
    rt.writer.emit(
        ev.ACTION_REPLAYED,
        key=action.key,
        kind=action.kind,
        call_site=action.call_site,
        recorded_in=entry.attempt,
        saved_s=entry.duration_s,
        duration_s=round(time.monotonic() - started, 3),
        **details,
    )


def recorded_payload(action: identity.Action, seconds: float, reason: str) -> dict[str, Any]:
    """What ``action.recorded`` says of any action that ran: its names, how long, and why."""
    return {
        "key": action.key,
        "kind": action.kind,
        "call_site": action.call_site,
        "fingerprint": action.fingerprint,
        "duration_s": round(seconds, 3),
        "ran_because": reason,
    }


class Call:
    """One action call: replayed from the plan's record, or run and recorded."""

    def __init__(self, rt: runtime.Runtime, kind: Kind, action: identity.Action, shape: str, subject: Any):
        self.rt, self.kind, self.action, self.shape, self.subject = rt, kind, action, shape, subject

    def run(self, live: Callable[[], Any]) -> Any:
        entry, reason = offered(self.rt, self.action)
        if entry is not None:
            try:
                return self._replay(entry)
            except Exception as error:
                warn(f"the result of {self.action.key} not replayed", error)
                reason = f"its result could not be read: {error}"
        if self.kind.name == "show":
            return self._show_live(live, reason)
        if self.kind.name == "toPandas":
            return self._to_pandas_live(live, reason)
        started = time.monotonic()
        value = live()
        if self.kind.name == "toLocalIterator":
            return self._iterate_live(value, started, reason)
        self._record(value, time.monotonic() - started, reason)
        return value

    # -- replay --------------------------------------------------------------------------------

    def _replay(self, entry: ActionEntry) -> Any:
        started = time.monotonic()
        if entry.path is None or entry.sha256 is None:
            raise ValueError("no result file recorded")
        data = _read(self.rt.run_dir, entry.path)
        shape, value = recorder.decode(data, entry.sha256, entry.path)
        if shape != self.shape and not (self.kind.name == "toPandas" and shape == recorder.ARROW):
            raise ValueError(f"recorded as {shape}, asked for {self.shape}")
        journal_replayed(self.rt, self.action, entry, started, rows=entry.rows)
        if self.kind.name == "show":
            print(value)
            return None
        if self.kind.name == "toLocalIterator":
            return iter(value)
        if self.kind.name == "toPandas":
            return pandas_frames.replay(self.subject, shape, value)
        return value

    # -- run and record ------------------------------------------------------------------------

    def _record(self, value: Any, seconds: float, reason: str, rows: Any = None) -> None:
        """Queue the result to be kept (rows: the rows standing for a value that is not them)."""
        kept = value if rows is None else rows
        if self.shape == recorder.ROWS:
            kept = list(kept)  # the script may sort or extend its list while the file is written
        elif self.shape == recorder.VALUE:
            try:  # plain values are encoded now, once: the script may change a dict it was handed
                kept = codec.encode_value(kept)
            except codec.Unrecordable as why:
                self._journal(seconds, reason, None, f"{why} cannot be kept")
                return
        schema = self.subject.schema if self.shape in (recorder.ROWS, recorder.ROW) else None
        limit = self.rt.result_limit

        def make() -> recorder.Encoded:
            return recorder.encode(self.shape, kept, schema, limit)

        self._journal(seconds, reason, make, None, _summary(self.kind.name, value))

    def _journal(
        self, seconds: float, reason: str, make: Any, not_kept: str | None, summary: str | None = None
    ) -> None:
        payload = recorded_payload(self.action, seconds, reason)
        if summary is not None:
            payload["summary"] = summary
        if not_kept is not None:
            payload["not_kept"] = not_kept
        assert self.rt.recorder is not None
        self.rt.recorder.record(payload, make)

    def _show_live(self, live: Callable[[], Any], reason: str) -> None:
        """pyspark's own show, what it prints kept too (a failing show raises from pyspark's frame)."""
        started = time.monotonic()
        printed = _Tee(sys.stdout)
        with contextlib.redirect_stdout(printed):
            live()
        self._record(printed.text().removesuffix("\n"), time.monotonic() - started, reason)
        return None

    def _iterate_live(self, rows: Iterator[Any], started: float, reason: str) -> Iterator[Any]:
        seen = []
        for row in rows:
            seen.append(row)
            yield row
        # Kept only once the script read it all: a partial read says nothing of the rest.
        self._record(seen, time.monotonic() - started, reason)

    def _to_pandas_live(self, live: Callable[[], Any], reason: str) -> Any:
        """pyspark's toPandas, what it built its frame from kept: Arrow batches or rows."""
        started = time.monotonic()
        value, feed = pandas_frames.live(live, self.rt.result_limit)
        seconds = time.monotonic() - started
        if feed.arrow is not None:
            self._journal(seconds, reason, feed.kept, None, _summary(self.kind.name, range(len(value))))
        else:
            self._record(value, seconds, reason, rows=feed.rows)
        return value


class _Tee(io.TextIOBase):
    """Writes pass through to ``stream``; those of the thread that made it are kept as well
    (another thread printing meanwhile is not part of the table)."""

    def __init__(self, stream: Any):
        self.stream, self.thread, self.kept = stream, threading.get_ident(), io.StringIO()

    def write(self, text: str) -> int:
        if threading.get_ident() == self.thread:
            self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def text(self) -> str:
        return self.kept.getvalue()


def _summary(kind: str, value: Any) -> str | None:
    """A few words for ``replay`` and ``inspect``: a count's number, a list's length (no data)."""
    if kind in ("count", "rdd.count", "isEmpty", "rdd.isEmpty"):
        return f"{kind.removeprefix('rdd.')}() = {value!r}"
    if isinstance(value, (list, range)):
        return f"{len(value):,} row{'s' if len(value) != 1 else ''}"
    return None


def _read(run_dir: str, path: str) -> bytes:
    return storage.read_bytes(results.url_of(run_dir, path))
