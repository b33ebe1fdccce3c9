"""The Python API used inside a Spark application: ``checkpoint`` and ``stage`` (docs/api.md).

Under ``sparkrecover submit`` each call is a stage of the run: ``driver/lifecycle/stages.py`` walks it
through the one stage lifecycle, and the adapters here say what a checkpoint and a stage function
read, write and leave behind. Anywhere else it runs everything and records nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from sparkrecover.driver.lifecycle import stages
from sparkrecover.driver.process import runtime
from sparkrecover.driver.tasks import taskresume
from sparkrecover.errors import UsageError
from sparkrecover.kinds import Verdict
from sparkrecover.rundir import manifests, storage
from sparkrecover.rundir.plans import PlanEntry

_NAME = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or name.strip() != name or name in (".", ".."):
        raise UsageError(f"invalid stage name {name!r}: use 1-200 printable characters without '/'")
    return name


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    return session if session is not None else SparkSession.builder.getOrCreate()


def checkpoint(
    name: str, build: Any, *, path: str | None = None, format: str = "parquet", version: str | None = None
) -> Any:
    """A durable, named checkpoint of a DataFrame; returns the DataFrame read back from it.

    ``build`` is a DataFrame or a zero-argument callable returning one. On resume, a committed
    checkpoint whose output survives and whose fingerprint is unchanged is read back: ``build``
    is called only to construct its (lazy) DataFrame for the fingerprint, and nothing of it is
    computed or written.
    """
    _check_name(name)
    rt = runtime.current()
    if rt is None:
        frame = build() if callable(build) else build
        if path is None:
            return frame  # nothing to record and nowhere to write: the DataFrame as built
        frame.write.mode("overwrite").format(format).save(path)
        return frame.sparkSession.read.schema(frame.schema).format(format).load(path)
    spark = build.sparkSession if not callable(build) else _active_session()
    if path is None:
        url = rt.checkpoint_url(name)
        located = (url, storage.to_spark_path(url))
    else:
        located = stages.qualify(spark, path)
    return stages.run(rt, CheckpointStage(rt, name, build, spark, located, format, version))


class CheckpointStage:
    """A declared checkpoint as the stage lifecycle sees it: its output is a folder it overwrites
    (an earlier attempt leaves nothing to clean, but maybe committed tasks to keep), and its result
    is the DataFrame read back from it."""

    kind = "checkpoint"

    def __init__(
        self,
        rt: runtime.Runtime,
        name: str,
        build: Any,
        spark: Any,
        located: tuple[str, str],
        format: str,
        version: str | None,
    ):
        self.rt, self.name, self.build, self.spark = rt, name, build, spark
        self.url, self.spark_path = located
        self.format, self.version = format, version
        self.schema: str | None = None
        self.target: taskresume.Target | None = None
        self._frame: Any = None

    @property
    def frame(self) -> Any:
        if self._frame is None:
            self._frame = self.build() if callable(self.build) else self.build
        return self._frame

    def outputs(self) -> list[str]:
        entry = self.rt.decision(self.name)
        if entry is not None and entry.decision == Verdict.SKIP and entry.committed is not None:
            return [storage.from_spark_path(p) for p in entry.committed.paths]  # where it was committed
        return [self.url]

    def reads(self) -> tuple[Any, Any, list[str]]:
        return (self.build if callable(self.build) else None), self.frame, self.frame.inputFiles()

    def skip_problem(self, entry: PlanEntry) -> str | None:
        return None

    def skipped(self, entry: PlanEntry, lost: bool) -> Any:
        if lost or entry.committed is None:
            return self.frame  # computed from its lineage, should anything read it
        committed = entry.committed
        return _read_checkpoint(self.spark, committed.paths[0], committed.format or self.format, committed.schema)

    def invalidated(self, entry: PlanEntry, reason: str) -> PlanEntry:
        return entry

    def set_aside(self, entry: PlanEntry) -> taskresume.TaskPlan | None:
        # The committed tasks of a checkpoint that died mid-write are set aside before the
        # overwrite deletes its folder.
        self.target = taskresume.Target(self.frame, self.spark, self.url, self.spark_path, "overwrite", self.format)
        return taskresume.prepare(self.target, entry)

    def clean(self, entry: PlanEntry) -> dict[str, Any]:
        return {}  # the overwrite replaces whatever an earlier attempt left

    def execute(self, tasks: taskresume.TaskPlan | None) -> Any:
        writer = self.frame.write.mode("overwrite").format(self.format)
        if tasks is not None and self.target is not None:
            taskresume.journal_write_started(self.rt, self.name, self.target, tasks)
            taskresume.run(self.target, tasks, writer, lambda: writer.save(self.spark_path))
        else:
            writer.save(self.spark_path)
        self.schema = self.frame.schema.json()
        return _read_checkpoint(self.spark, self.spark_path, self.format, self.schema)

    def committed(self) -> tuple[stages.Outputs, dict[str, Any], list[dict[str, Any]] | None]:
        return [(self.url, self.spark_path)], {"format": self.format, "schema": self.schema}, None


def _read_checkpoint(spark: Any, spark_path: str, format: str, schema_json: str | None) -> Any:
    reader = spark.read.format(format)
    if schema_json:
        # A recorded schema (pure data: docs/design.md §4 rule 8) spares Spark a schema-inference job.
        import json

        from pyspark.sql.types import StructType

        reader = reader.schema(StructType.fromJson(json.loads(schema_json)))
    return reader.load(spark_path)


class StageFunction:
    """A function run as a pipeline stage with declared outputs (see ``stage``)."""

    def __init__(self, name: str, fn: Callable[..., Any], outputs: Iterable[str], version: str | None):
        self.name = _check_name(name)
        self.fn = fn
        self.outputs = list(outputs)
        self.version = version
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        rt = runtime.current()
        if rt is None:
            return self.fn(*args, **kwargs)
        return stages.run(rt, FunctionStage(rt, self, _active_session(), args, kwargs))


class FunctionStage:
    """A ``@stage`` function as the stage lifecycle sees it: its declared outputs are what it
    commits; an earlier attempt's writes to them are undone before it runs again, and its write to
    its one output (when it has one) keeps the committed tasks of an unfinished attempt."""

    kind = "stage"

    def __init__(self, rt: runtime.Runtime, function: StageFunction, spark: Any, args: tuple, kwargs: dict):
        self.rt, self.name, self.spark = rt, function.name, spark
        self.fn, self.version, self.args, self.kwargs = function.fn, function.version, args, kwargs
        self.located = [stages.qualify(spark, path) for path in function.outputs]
        self.expected: taskresume.ExpectedWrite | None = None

    def outputs(self) -> list[str]:
        return [url for url, _ in self.located]

    def reads(self) -> tuple[Any, Any, list[str]]:
        return self.fn, None, _files_read_by(self.fn, self.args, self.kwargs)

    def skip_problem(self, entry: PlanEntry) -> str | None:
        return None

    def skipped(self, entry: PlanEntry, lost: bool) -> Any:
        return None

    def invalidated(self, entry: PlanEntry, reason: str) -> PlanEntry:
        return entry

    def set_aside(self, entry: PlanEntry) -> taskresume.TaskPlan | None:
        if len(self.located) == 1:
            # Set aside now, before the cleaning below; the write hook plans the write when the
            # function makes it (its DataFrame is not known before).
            self.expected = taskresume.ExpectedWrite(self.name, entry, *self.located[0])
            taskresume.set_aside(self.expected.url, entry)
        return None

    def clean(self, entry: PlanEntry) -> dict[str, Any]:
        for before in entry.restore:
            manifests.restore_output(before)  # no data left twice by an earlier write (§4 rule 2)
        extra: dict[str, Any] = {
            "before": [manifests.build_output(url, spark_path) for url, spark_path in self.located]
        }
        if len(self.located) != 1:  # a resume says why it keeps no committed partition
            extra["whole"] = (
                f"it declares {len(self.located)} outputs, and only a stage with one keeps the committed "
                "partitions of its write to it"
            )
        return extra

    def execute(self, tasks: taskresume.TaskPlan | None) -> Any:
        self.rt.expect_write(self.expected)
        try:
            return self.fn(*self.args, **self.kwargs)
        finally:
            self.rt.expect_write(None)

    def committed(self) -> tuple[stages.Outputs, dict[str, Any], list[dict[str, Any]] | None]:
        return self.located, {}, None


def _files_read_by(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[str]:
    """Best effort: the input files of the DataFrames a stage function can see (its arguments,
    closure and the globals it names). Missing one only means a lost upstream output is not
    rebuilt ahead of time; its DataFrame is still recomputed from lineage when read."""
    from pyspark.sql import DataFrame

    code = getattr(fn, "__code__", None)
    seen = list(args) + list(kwargs.values())
    if code is not None:
        seen += [cell.cell_contents for cell in (fn.__closure__ or ()) if _filled(cell)]
        seen += [fn.__globals__[n] for n in code.co_names if n in fn.__globals__]
    files: list[str] = []
    for value in seen:
        if isinstance(value, DataFrame):
            files.extend(value.inputFiles())
    return files


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents  # an empty cell raises ValueError
    except ValueError:
        return False
    return True


def stage(
    name: Any = None, fn: Callable[..., Any] | None = None, *, outputs: Iterable[str] = (), version: str | None = None
) -> Any:
    """Declare a stage with side effects and declared outputs.

    ``@stage``, ``@stage("name", outputs=[...])`` and ``@stage(outputs=[...])`` decorate a function;
    ``stage("name", fn, outputs=[...])`` runs ``fn`` as that stage now and returns its result.
    A skipped stage returns None.
    """
    if callable(name) and fn is None:
        return StageFunction(name.__name__, name, outputs, version)
    if fn is not None:
        return StageFunction(name or fn.__name__, fn, outputs, version)()

    def decorate(function: Callable[..., Any]) -> StageFunction:
        return StageFunction(name or function.__name__, function, outputs, version)

    return decorate
