"""Zero-code mode (docs/zero-code.md): terminal DataFrame and RDD writes of an unmodified script
become implicit stages.

``install`` patches pyspark's writers through the one patch table (``driver/recording/hooks.py``). A patched
method does exactly what pyspark's does when no sparkrecover runtime is active, and inside a
``checkpoint`` or ``stage`` (whose own writes belong to that stage). The names of implicit stages
(call site, ordinal, target) are made here too: ``sqlwrites`` names its statements the same way.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from sparkrecover.driver.lifecycle import stages
from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recording import hooks, writes
from sparkrecover.driver.tasks import taskresume
from sparkrecover.rundir import storage

V1_WRITES = ("save", "parquet", "json", "csv", "orc", "text", "xml", "saveAsTable", "insertInto", "jdbc")
# RDD saves: each writes a new folder (Hadoop's output check fails if it exists), like errorifexists.
RDD_SAVES = ("saveAsTextFile", "saveAsPickleFile", "saveAsSequenceFile", "saveAsHadoopFile", "saveAsNewAPIHadoopFile")
V2_WRITES = {
    "create": writes.CREATE,
    "replace": writes.OVERWRITE,
    "createOrReplace": writes.OVERWRITE,
    "append": writes.APPEND,
    "overwrite": writes.OVERWRITE,
    "overwritePartitions": writes.OVERWRITE,
}

# Frames of these top-level packages are never the user's call site: the writers' own code and
# the layers between the user's call and ours. sparkrecover's demo is a user program of ours.
_OWN_PACKAGES = frozenset({"sparkrecover", "pyspark", "py4j"})
_USER_SUBPACKAGES = ("sparkrecover.demo",)
_lock = threading.Lock()
_base_dir = ""


def install(script: str | None = None) -> None:
    """Patch pyspark's writers (once). Call sites are named relative to the script's folder."""
    global _base_dir
    from pyspark.sql.readwriter import DataFrameWriter, DataFrameWriterV2

    _base_dir = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
    hooks.track(DataFrameWriter, ("mode", "format", "option", "options"))
    for name in V1_WRITES:
        if hasattr(DataFrameWriter, name):
            hooks.patch(DataFrameWriter, name, functools.partial(_recorded, _describe_v1, name))
    hooks.patch(DataFrameWriterV2, "__init__", _remember_table)
    for name in V2_WRITES:
        hooks.patch(DataFrameWriterV2, name, functools.partial(_recorded, _describe_v2, name))
    from pyspark import RDD

    for name in RDD_SAVES:
        if hasattr(RDD, name):
            hooks.patch(RDD, name, functools.partial(_recorded, _describe_rdd, name))


def _remember_table(original: Any) -> Any:
    def init(self: Any, df: Any, table: str, *args: Any, **kwargs: Any) -> None:
        original(self, df, table, *args, **kwargs)
        self._sr_table = table

    return init


def _recorded(describe: Callable[..., writes.Write], name: str, original: Any) -> Any:
    signature = inspect.signature(original)

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        rt = runtime.current()
        if rt is None:
            return original(self, *args, **kwargs)
        if rt.in_stage:  # the stage's own write; the one to its declared output keeps its tasks
            expected = rt.expected_write() if describe is _describe_v1 else None
            if expected is None:
                return original(self, *args, **kwargs)
            return _expected_write(rt, expected, self, name, signature, args, kwargs, original)
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            return original(self, *args, **kwargs)  # pyspark's own error for a wrong call
        try:
            call = describe(self, name, bound)
        except Exception as error:
            messages.say(f"sparkrecover: warning: {name}() not recorded: {type(error).__name__}: {error}")
            return original(self, *args, **kwargs)
        return writes.run(rt, call, lambda: original(self, *args, **kwargs))

    return write


def _expected_write(
    rt: runtime.Runtime,
    expected: taskresume.ExpectedWrite,
    writer: Any,
    method: str,
    signature: inspect.Signature,
    args: tuple,
    kwargs: dict,
    original: Any,
) -> Any:
    """A declared stage's write: through task-level resume when it writes the stage's output."""

    def do_write() -> Any:
        return original(writer, *args, **kwargs)

    try:
        call = hooks.writer_call(writer, method, signature.bind(writer, *args, **kwargs).arguments)
        if call.path is None or method in ("saveAsTable", "insertInto", "jdbc"):
            return do_write()
        url, spark_path = stages.qualify(writer._spark, call.path)
        if url != expected.url:
            return do_write()
        rt.expect_write(None)  # one write keeps the stage's tasks: its first to the output
        target = taskresume.Target(writer._df, writer._spark, url, spark_path, call.mode, call.format)
        plan = taskresume.plan_write(target, expected.entry)
    except Exception as error:  # task-level resume must never break the user's write
        messages.say(f"sparkrecover: warning: {method}() runs whole: {type(error).__name__}: {error}")
        return do_write()
    if plan is None:
        return do_write()
    taskresume.journal_write_started(rt, expected.stage, target, plan)
    return taskresume.run(target, plan, writer, do_write)


# -- identity -------------------------------------------------------------------------------------


def is_own_module(module: str) -> bool:
    """Whether code of this module (its ``__name__``) is ours or pyspark's rather than the user's.

    Decided by the module's name, not its file's folder: a user's file may live anywhere (even
    beside ours), and our modules may move between subpackages without changing the answer.
    """
    if any(module == user or module.startswith(user + ".") for user in _USER_SUBPACKAGES):
        return False
    return module.split(".", 1)[0] in _OWN_PACKAGES


def call_site() -> tuple[str, int]:
    """The user's file and line: the first frame whose module is not ours or pyspark's."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if not is_own_module(str(frame.f_globals.get("__name__") or "")):
            return os.path.abspath(frame.f_code.co_filename), frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


def _site_label(filename: str) -> str:
    # Before install() (a read patched alone, in a test) the working folder stands in for the script's.
    relative = os.path.relpath(filename, _base_dir or os.getcwd()) if filename.startswith(os.sep) else filename
    return filename if relative.startswith("..") else relative


def user_site() -> str:
    """The user's call site as stage names show it: ``file:line``, the file relative to the
    script's folder (the same in every attempt, wherever the run directory is)."""
    filename, line = call_site()
    return f"{_site_label(filename)}:{line}"


def current_runtime() -> runtime.Runtime:
    """The installed runtime: describers run only under a write that found one (see ``_recorded``)."""
    rt = runtime.current()
    if rt is None:
        raise RuntimeError("no sparkrecover runtime installed")
    return rt


def identify(rt: runtime.Runtime, mode: str, target: str) -> tuple[str, str, int]:
    """(stage name, call site, ordinal). The ordinal counts writes of this target and mode at this
    call site, so a loop over targets names each target's writes the same way every attempt."""
    site = user_site()
    with _lock:
        ordinal = rt.write_ordinals.get((site, mode, target), 0) + 1
        rt.write_ordinals[(site, mode, target)] = ordinal
    return f"{site}#{ordinal} {mode} {target}", site, ordinal


def next_name(rt: runtime.Runtime, mode: str, target: str) -> str:
    """The name ``identify`` would give the next such write here, without counting it."""
    site = user_site()
    with _lock:
        ordinal = rt.write_ordinals.get((site, mode, target), 0) + 1
    return f"{site}#{ordinal} {mode} {target}"


def _category(mode: str) -> str:
    return {"append": writes.APPEND, "overwrite": writes.OVERWRITE}.get(mode, writes.CREATE)


def _describe_v1(writer: Any, method: str, bound: dict[str, Any]) -> writes.Write:
    spark, frame = writer._spark, writer._df
    call = hooks.writer_call(writer, method, bound)
    mode, fmt = call.mode, call.format
    if method == "insertInto":
        overwrite = bound.get("overwrite")
        # insertInto appends unless asked to overwrite; errorifexists and ignore mean append.
        mode = (
            ("overwrite" if overwrite else "append")
            if overwrite is not None
            else ("overwrite" if mode == "overwrite" else "append")
        )
        return table_write(spark, frame, bound["tableName"], mode, _category(mode), fmt)
    if method == "saveAsTable":
        return table_write(spark, frame, bound["name"], mode, _category(mode), fmt, path=call.path)
    if method == "jdbc":
        return _sink_write(spark, frame, f"jdbc table {bound['table']}", mode, _category(mode))
    if call.path is None or call.logged:
        label = call.path if call.path is not None else f"{fmt or 'default'} sink"
        return _sink_write(spark, frame, label, mode, _category(mode))
    url, spark_path = stages.qualify(spark, call.path)
    name, site, ordinal = identify(current_runtime(), mode, url)
    return writes.Write(
        name,
        site,
        ordinal,
        mode,
        _category(mode),
        url,
        frame,
        spark,
        url=url,
        spark_path=spark_path,
        existed=storage.data_exists(url),
        writer=writer,
        format=fmt,
    )


def _describe_v2(writer: Any, method: str, bound: dict[str, Any]) -> writes.Write:
    return table_write(writer._spark, writer._df, writer._sr_table, method, V2_WRITES[method], None)


def _describe_rdd(rdd: Any, method: str, bound: dict[str, Any]) -> writes.Write:
    """An RDD save: a path target written as a new folder. An RDD has no DataFrame plan: its
    lineage (``toDebugString``, ids stripped) stands in for one
    (docs/decisions/0017-rdd-saves.md)."""
    return folder_write(RDDSource(rdd), str(bound["path"]), "errorifexists", writes.CREATE)


def folder_write(source: Any, path: str, mode: str, category: str) -> writes.Write:
    """A write of a whole folder by something that is not a DataFrame (an RDD, a model): ``source``
    stands in for the DataFrame (``sparkContext``, ``canonical_plan``, ``inputFiles``)."""
    url, spark_path = stages.qualify(source, path)
    name, site, ordinal = identify(current_runtime(), mode, url)
    return writes.Write(
        name,
        site,
        ordinal,
        mode,
        category,
        url,
        source,
        source,
        url=url,
        spark_path=spark_path,
        existed=storage.data_exists(url),
    )


# Lines of an RDD's debug string that change from run to run: RDD ids, cached sizes, and the JVM
# frame that made it ("textFile at NativeMethodAccessorImpl.java:0" turns "<unknown>:0" once the
# JVM has compiled its reflective call into an accessor of its own: a count of calls, not a plan).
_RDD_NOISE = re.compile(r"\[\d+\]|^.*CachedPartitions:.*$|(?<=\w) at [^\s\[]+:\d+(?= \[)", re.MULTILINE)
# "<name> HadoopRDD[n] at ..." / "NewHadoopRDD": the name of a file RDD is the path it reads.
_RDD_INPUT = re.compile(r"(?:^|[\s|+-])(\S+) (?:New)?HadoopRDD\[\d+\]", re.MULTILINE)


class RDDSource:
    """What ``writes.run`` needs of the data being written, for an RDD: its SparkContext (as
    ``spark.sparkContext``), the files it reads and a plan to fingerprint."""

    def __init__(self, rdd: Any):
        self.rdd = rdd
        self.sparkContext = rdd.ctx
        self._debug: str | None = None

    def debug_string(self) -> str | None:
        if self._debug is None:
            try:
                self._debug = str(self.rdd._jrdd.toDebugString())
            except Exception:
                return None
        return self._debug

    def canonical_plan(self) -> str | None:
        text = self.debug_string()
        return None if text is None else _RDD_NOISE.sub("", text)

    def inputFiles(self) -> list[str]:  # the name DataFrame.inputFiles has
        found: list[str] = []
        for names in _RDD_INPUT.findall(self.debug_string() or ""):
            for name in names.split(","):
                found += [file for file in _files_in(name) if file not in found]
        return found


def _files_in(path: str) -> list[str]:
    """The files an RDD's input path reads: a folder's data files, as Hadoop's input formats take
    them (not hidden: ``_SUCCESS``, ``.crc``), so that a file rewritten inside it is seen (the
    folder's own size and time do not change); a file, or what cannot be listed, as it is."""
    if not path:
        return []
    try:
        fs, where = storage.data_filesystem(storage.from_spark_path(path))
        if not fs.isdir(where):
            return [path]
        names = sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(where, detail=False))
    except Exception:
        return [path]
    return [f"{path.rstrip('/')}/{name}" for name in names if not name.startswith(("_", "."))]


def table_write(
    spark: Any, frame: Any, table: str, mode: str, category: str, fmt: str | None, path: str | None = None
) -> writes.Write:
    existed, location, provider = writes.table_info(spark, table)
    if not existed and path is not None:
        location = stages.qualify(spark, str(path))[1]
    name, site, ordinal = identify(current_runtime(), mode, f"table {table}")
    call = writes.Write(
        name, site, ordinal, mode, category, f"table {table}", frame, spark, table=table, existed=existed
    )
    if location and str(provider or fmt or "").lower() not in hooks.LOGGED_FORMATS:
        call.url, call.spark_path = storage.from_spark_path(location), location
    return call


def _sink_write(spark: Any, frame: Any, label: str, mode: str, category: str) -> writes.Write:
    name, site, ordinal = identify(current_runtime(), mode, label)
    return writes.Write(name, site, ordinal, mode, category, label, frame, spark)
