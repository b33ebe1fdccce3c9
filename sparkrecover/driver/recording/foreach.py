"""``foreach`` and ``foreachPartition`` as stages whose side effects are kept per partition (zero-code
mode, docs/zero-code.md).

Under ``sparkrecover submit`` a call of ``RDD.foreach``, ``RDD.foreachPartition``,
``DataFrame.foreach`` or ``DataFrame.foreachPartition`` is an implicit stage named by its call site,
as a write is (``<file>:<line>#<n> foreachPartition DataFrame``), and goes through the one stage
lifecycle: a finished one (its job succeeded) is skipped on resume. Its function runs through
``SparkContext.runJob`` over the partitions it still has to run: every one in a first attempt; when
the plan says ``continue``, only those whose task had not finished in earlier attempts. That is
Spark's own task-retry rule, across drivers: a task that finished is not run again, one that was
running when the driver died is. ``runJob`` computes only the partitions it is given; skipping
inside the function would still compute every partition of the lineage.

Which tasks finished comes from the listener, which journals each successful task of the stage's
job as ``task.committed`` (as a write's); ``write.started`` gives the partition count and shape. A
lost event can only make a finished partition run again, never skip an unfinished one
(docs/decisions/0044-side-effects-kept-per-partition.md). Partition i is kept only when it holds the
same rows again: the same fingerprint, the same shape (partition count, input slices, the script's
code), and Spark does not call its RDD INDETERMINATE; otherwise every partition runs, and
``write.started`` says why.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.lifecycle import stages
from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recording import hooks, zerocode
from sparkrecover.driver.tasks import partitions, taskresume
from sparkrecover.journal import events as ev
from sparkrecover.kinds import FOREACH, Verdict
from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import PlanEntry

METHODS = ("foreach", "foreachPartition")


def install() -> None:
    """Patch the RDD's and the (classic) DataFrame's ``foreach`` and ``foreachPartition`` (once)."""
    from pyspark import RDD

    for name in METHODS:
        hooks.patch(RDD, name, functools.partial(_recorded, name, rdd_rows))
        hooks.patch(_dataframe_class(), name, functools.partial(_recorded, name, frame_rows))


def _dataframe_class() -> type:
    import importlib

    try:  # Spark 4: the classic DataFrame implements them (Spark Connect's runs in its server)
        module = importlib.import_module("pyspark.sql.classic.dataframe")
    except ImportError:  # Spark 3.5
        module = importlib.import_module("pyspark.sql.dataframe")
    return module.DataFrame


@dataclass
class Rows:
    """What a foreach runs over, as the stage needs it."""

    label: str  # "RDD" or "DataFrame": the target in the stage's name
    spark: Any  # what has the ``sparkContext`` (the session, or the RDD's stand-in)
    frame: Any  # what the fingerprint reads: the DataFrame, or the RDD's stand-in (its lineage)
    shape: Callable[[], partitions.WriteShape]  # measured when the stage runs
    rdd: Callable[[partitions.WriteShape], Any]  # the Python RDD whose partitions run
    files: list[str] = field(default_factory=list)  # the input files it reads


def rdd_rows(rdd: Any) -> Rows:
    source = zerocode.RDDSource(rdd)
    return Rows(
        "RDD", source, source, lambda: partitions.shape_of_rdd(rdd), lambda shape: rdd, list(source.inputFiles())
    )


def frame_rows(frame: Any) -> Rows:
    def rdd(shape: partitions.WriteShape) -> Any:
        # The probe ran the query's map stages: the rows run from that executed RDD, not from a
        # query planned again (its map stages would run twice, its partitions maybe others).
        return partitions.without_partitions(frame, ()).rdd if shape.executed else frame.rdd

    try:
        files = list(frame.inputFiles())
    except Exception:
        files = []
    return Rows("DataFrame", frame.sparkSession, frame, lambda: partitions.shape_of(frame), rdd, files)


def _recorded(method: str, describe: Callable[[Any], Rows], original: Any) -> Any:
    signature = inspect.signature(original)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        rt = runtime.current()
        if rt is None or rt.in_stage:  # inside a declared stage, it belongs to that stage
            return original(self, *args, **kwargs)
        try:
            fn = signature.bind(self, *args, **kwargs).arguments["f"]
        except (TypeError, KeyError):
            return original(self, *args, **kwargs)  # pyspark's own error for a wrong call
        try:
            rows = describe(self)
        except Exception as error:
            messages.say(f"sparkrecover: warning: {method}() not recorded: {type(error).__name__}: {error}")
            return original(self, *args, **kwargs)
        return stages.run(rt, ForeachStage(rt, method, rows, fn))

    return run


class ForeachStage:
    """A foreach as the stage lifecycle sees it: no output to check, nothing to clean; its work is
    the partitions it has still to run."""

    kind = FOREACH

    def __init__(self, rt: runtime.Runtime, method: str, rows: Rows, fn: Any):
        self.rt, self.method, self.rows, self.fn = rt, method, rows, fn
        self.name, self.call_site, self.ordinal = zerocode.identify(rt, method, rows.label)
        self.spark = rows.spark
        self.version: str | None = None
        self.rdd: Any = None  # the Python RDD whose partitions run, and how many it has (set_aside)
        self.count = 0

    def outputs(self) -> list[str]:
        return []

    def reads(self) -> tuple[Any, Any, list[str]]:
        # The function is part of what it did: an edited one runs again, as an edited @stage does.
        return self.fn, self.rows.frame, list(self.rows.files)

    def skip_problem(self, entry: PlanEntry) -> str | None:
        return None

    def skipped(self, entry: PlanEntry, lost: bool) -> Any:
        return None  # foreach returns None

    def invalidated(self, entry: PlanEntry, reason: str) -> PlanEntry:
        return entry

    def set_aside(self, entry: PlanEntry) -> taskresume.TaskPlan:
        """The partitions this attempt keeps: the plan's, when partition i holds the same rows now."""
        shape = self.rows.shape()
        if shape.reusable:
            # The script's code is part of what partition i holds (a lambda upstream in the RDD's
            # lineage does not show in it), as for a write (taskresume.plan_write).
            script = staleness.script_digest(sys.argv[0], storage.read_bytes)
            shape.digest = hashlib.sha256(f"{shape.digest}\n{script}".encode()).hexdigest()[:32]
        plan = taskresume.TaskPlan(shape, shape.reason)
        tasks = entry.tasks if entry.decision == Verdict.CONTINUE else None
        if tasks and plan.reusable:
            plan.reason = taskresume._changed(tasks, shape)
            if plan.reason is None:
                plan.kept = sorted(p for p in set(tasks.kept) if 0 <= p < shape.partitions)
        # Before stage.started marks the jobs that follow as the stage's work: whatever the rows
        # still need to run first (a query planned again without the probe) journals nothing.
        self.rdd = self.rows.rdd(shape)
        self.count = int(self.rdd.getNumPartitions())
        return plan

    def clean(self, entry: PlanEntry) -> dict[str, Any]:
        # A side effect is the function's own: nothing of ours to clean, nothing to verify.
        return {
            "call_site": self.call_site,
            "ordinal": self.ordinal,
            "target": self.rows.label,
            "mode": self.method,
            "verifiable": False,
        }

    def execute(self, tasks: taskresume.TaskPlan | None) -> Any:
        assert tasks is not None, "the lifecycle calls set_aside first"
        plan, kept = tasks, set(tasks.kept)
        self.rt.writer.emit(
            ev.WRITE_STARTED,
            stage=self.name,
            partitions=self.count,
            staging=None,  # a side effect has no staging folder of ours
            shape=plan.shape.digest,
            reusable=plan.shape.reusable,
            reason=plan.reason,
            kept=sorted(kept),
            kept_dir=None,
            specs=plan.shape.specs_digest,
        )
        missing = [p for p in range(self.count) if p not in kept]
        if missing:
            # The listener journals each of these tasks as it finishes (the job runs after
            # stage.started: the Scope marked it the stage's work).
            self.rdd.ctx.runJob(self.rdd, _partition_function(self.method, self.fn), missing)
        return None

    def committed(self) -> tuple[stages.Outputs, dict[str, Any], list[dict[str, Any]] | None]:
        return [], {}, None


def _partition_function(method: str, fn: Any) -> Callable[[Iterable[Any]], Iterable[Any]]:
    """What pyspark's ``foreach``/``foreachPartition`` run in each task, returning nothing: the
    job's results come back to the driver, so whatever a ``foreachPartition`` function yields (a
    generator, as pyspark still accepts) is consumed there, not sent."""
    if method == "foreach":
        from pyspark.util import fail_on_stopiteration

        each = fail_on_stopiteration(fn)

        def every_row(iterator: Iterable[Any]) -> Iterable[Any]:
            for row in iterator:
                each(row)
            return iter(())

        return every_row

    def whole_partition(iterator: Iterable[Any]) -> Iterable[Any]:
        returned = fn(iterator)
        if returned is not None:
            try:
                items = iter(returned)
            except TypeError:
                items = iter(())
            for _ in items:
                pass
        return iter(())

    return whole_partition
