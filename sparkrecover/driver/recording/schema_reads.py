"""Inferred schemas (docs/resume.md): a resumed attempt does not pay Spark's inference pass again.

Reads without a schema run Spark jobs just to learn it (also through ``.format(x).load(p)``):
``json(p)`` and ``xml(p)`` a pass over the data, ``csv`` one too with ``inferSchema=true`` and a job
for its first line without, ``parquet`` and ``orc`` one over their footers (all of them with
``mergeSchema=true``). The driver journals what a read inferred (``schema.inferred``, with the
input files it read); a resumed attempt whose plan carries the schema of the same read reads with it instead,
after checking that the read lists the same files with the same sizes and times, and journals
``schema.reused``. Anything else reads as pyspark would.

Only the driver bootstrap imports this module and calls ``install``; with no runtime installed
(plain ``spark-submit``, a notebook) a patched method is pyspark's own. Nothing here may break the
user's read: a failure of ours is a warning on stderr (once) and the read pyspark would make.

The JVM reader keeps its format and options and pyspark never reads them back, so the patches note
them on the Python reader as they are set (like ``zerocode`` does for writers).
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
from dataclasses import dataclass
from typing import Any

import orjson

from sparkrecover.core.verdicts.staleness import INPUT_LIST_LIMIT, digest, stat_files
from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recording import hooks, zerocode
from sparkrecover.journal import events as ev
from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import SchemaEntry

READS = ("json", "csv", "xml", "parquet", "orc", "load")
# Session settings that change what inference makes of the same files: part of a read's key, so a
# relaunch with another setting infers again rather than reuse a schema Spark would not infer now.
INFERENCE_CONF = (
    "spark.sql.caseSensitive",
    "spark.sql.timestampType",
    "spark.sql.session.timeZone",
    "spark.sql.legacy.timeParserPolicy",
    "spark.sql.parquet.binaryAsString",
    "spark.sql.parquet.int96AsTimestamp",
    "spark.sql.parquet.inferTimestampNTZ.enabled",
    "spark.sql.sources.partitionColumnTypeInference.enabled",
)
_warned = False  # a failure of ours is told once per driver


@dataclass
class Read:
    """A read whose schema Spark would infer, as the journal and the plan name it."""

    key: str
    format: str
    paths: list[str]
    call_site: str


def install() -> None:
    """Patch pyspark's ``DataFrameReader`` (once, through the patch table of ``driver/recording/hooks.py``)."""
    global _warned
    from pyspark.sql.readwriter import DataFrameReader

    _warned = False
    hooks.track(DataFrameReader, ("format", "option", "options", "schema"))
    for name in READS:
        if hasattr(DataFrameReader, name):  # xml: Spark 4
            hooks.patch(DataFrameReader, name, functools.partial(_read, name))


def _warn(what: str, error: BaseException) -> None:
    global _warned
    if not _warned:  # once: a script reading in a loop would print it at every read
        _warned = True
        messages.say(
            f"sparkrecover: warning: {what}: {type(error).__name__}: {error} (reads go on as pyspark's)",
        )


def _replay(reader: Any, call: tuple[Any, ...]) -> None:
    if call[0] == "format":
        reader.format(call[1])
    elif call[0] == "option":
        reader.option(call[1], call[2])


# -- the patched reads ----------------------------------------------------------------------------


def _called_by_us() -> bool:
    """Whether the read's caller is sparkrecover's own code (a checkpoint read back, say)."""
    caller = sys._getframe(2)
    module = str(caller.f_globals.get("__name__") or "")
    return module.split(".", 1)[0] == "sparkrecover" and zerocode.is_own_module(module)


def _read(method: str, original: Any) -> Any:
    signature = inspect.signature(original)

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        rt = runtime.current()
        if rt is None or _called_by_us():
            return original(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            return original(self, *args, **kwargs)  # pyspark's own error for a wrong call
        try:
            call = describe(self, method, bound)
        except Exception as error:
            _warn(f"{method}() not checked for schema inference", error)
            return original(self, *args, **kwargs)
        if call is None:
            return original(self, *args, **kwargs)
        entry = rt.schemas.get(call.key)
        if entry is not None:
            try:
                frame = _reuse(rt, self, original, args, kwargs, call, entry)
            except Exception as error:
                _warn(f"the schema of {call.format} {' '.join(call.paths)} not reused", error)
                frame = None
            if frame is not None:
                return frame
        started = time.monotonic()
        frame = original(self, *args, **kwargs)  # the inference pass: its errors are the user's
        try:
            _record(rt, call, frame, time.monotonic() - started)
        except Exception as error:
            _warn(f"the schema of {call.format} {' '.join(call.paths)} not recorded", error)
        return frame

    return read


def describe(reader: Any, method: str, bound: dict[str, Any]) -> Read | None:
    """The read as its key names it, when Spark would infer its schema; else None."""
    before = hooks.told(reader)
    if before.schema or bound.get("schema") is not None:
        return None  # the user gave the schema: nothing is inferred
    spark = reader._spark
    fmt: Any = before.format
    options = before.options  # Spark's options are case-insensitive: the last one set wins
    if method == "load":
        fmt = bound.get("format") or fmt or spark.conf.get("spark.sql.sources.default", "parquet")
        given = dict(bound.get("options") or {})
        paths: Any = bound.get("path")
    elif method in ("parquet", "orc") and "paths" in bound:
        fmt, given, paths = method, dict(bound.get("options") or {}), list(bound.get("paths") or ())
    else:  # json, csv and xml: every other argument is an option
        fmt = method
        given = {name: value for name, value in bound.items() if name not in ("self", "path", "schema")}
        paths = bound.get("path")
    options.update((name.lower(), hooks.option_text(value)) for name, value in given.items() if value is not None)
    if paths is None:
        paths = options.get("path")
    paths = [paths] if isinstance(paths, str) else paths
    if not paths or not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
        return None  # an RDD or a DataFrame of lines, or no path: not files we can check
    fmt = str(fmt).lower()
    if not _infers(spark, fmt, options):
        return None
    options.pop("path", None)
    conf = [(name, spark.conf.get(name, None)) for name in INFERENCE_CONF]
    site = zerocode.user_site()
    paths = [str(p) for p in paths]
    # Options are in the key as a digest: every option counts (a list of the ones that change
    # inference would go stale with each Spark release), and their values (a credential passed
    # as an option) stay out of the journal.
    key = f"{site} {fmt} {orjson.dumps(paths).decode()} {digest(sorted(options.items()), spark.version, conf)[:12]}"
    return Read(key, fmt, paths, site)


def _infers(spark: Any, fmt: str, options: dict[str, str]) -> bool:
    # Each runs a job to learn its schema: JSON and XML a pass over the data, CSV one over the data
    # (inferSchema) or its first line, Parquet and ORC over their footers (all of them with
    # mergeSchema, one file's without).
    return fmt in ("json", "xml", "csv", "parquet", "orc")


def _inputs(frame: Any) -> list[list[Any]]:
    """[url, size, mtime] of every file the read lists: ``inputFiles`` asks the relation's file
    index, which Spark listed when it made the DataFrame (no job)."""
    return stat_files((storage.from_spark_path(path) for path in frame.inputFiles()), storage.data_stat)


def _record(rt: runtime.Runtime, call: Read, frame: Any, duration: float) -> None:
    inputs = _inputs(frame)
    payload: dict[str, Any] = {
        "key": call.key,
        "format": call.format,
        "paths": call.paths,
        "call_site": call.call_site,
        "schema": frame.schema.jsonValue(),
        "input_digest": digest(inputs),
        "input_count": len(inputs),
        "duration_s": round(duration, 3),
    }
    if len(inputs) <= INPUT_LIST_LIMIT:  # beyond, only the driver can check them (by the digest)
        payload["input_files"] = inputs
    rt.writer.emit(ev.SCHEMA_INFERRED, **payload)  # buffered: losing it only costs an inference


def _reuse(
    rt: runtime.Runtime,
    reader: Any,
    original: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    call: Read,
    entry: SchemaEntry,
) -> Any:
    """The read made with the recorded schema, or None when its input files differ from the ones
    inferred from (a file added, removed or rewritten since: the CLI could only check the latter).

    It is made on a fresh reader told what the user's was: the user's keeps no schema of ours for
    its next read. What the call itself sets on a reader (its keyword options) is then set on the
    user's too, as pyspark would have.
    """
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.types import StructType

    fresh = DataFrameReader(reader._spark)
    for made in list(hooks.calls(reader)):
        _replay(fresh, made)
    fresh.schema(StructType.fromJson(entry.schema))
    before = len(hooks.calls(fresh))
    started = time.monotonic()
    frame = original(fresh, *args, **kwargs)  # with a schema: the files are listed, not read
    inputs = _inputs(frame)
    if digest(inputs) != entry.input_digest:
        return None
    for made in hooks.calls(fresh)[before:]:
        _replay(reader, made)
    rt.writer.emit(
        ev.SCHEMA_REUSED,
        key=call.key,
        format=call.format,
        paths=call.paths,
        call_site=call.call_site,
        inferred_in=entry.attempt,
        input_count=len(inputs),
        duration_s=round(time.monotonic() - started, 3),
    )
    return frame
