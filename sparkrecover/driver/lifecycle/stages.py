"""One lifecycle for every stage: declared checkpoints, ``@stage`` functions and implicit writes.

As Spark routes every file write through one commit protocol, every stage goes through ``run``;
the three kinds are adapters (``StageKind``) that say only what differs: what the stage reads,
how a skipped one is put back, what an earlier attempt left to clean, and how it writes. The walk,
with the rule each step keeps (docs/design.md §4):

1. reach: a stage name is used once per run;
2. fingerprint: its code, plan, inputs, upstream and version now (§4 rule 5);
3. lost (committed, output gone, nothing that runs needs it): journaled as skipped, not rebuilt (§4 rule 4);
4. skip: a committed stage whose output survives and that is not stale is not run (§4 rules 3, 5);
   stale, it is invalidated and runs;
5. continue: an unfinished write keeps its committed partitions unless it is stale (§4a);
6. set the kept task outputs aside, then clean what an earlier attempt left (§4 rule 2);
7. fence, then ``stage.started``; the work; fence, then ``stage.committed`` after Spark's job
   commit returned (§4 rule 1); a failure is ``stage.failed``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.lifecycle import fingerprints
from sparkrecover.driver.process import fence, runtime
from sparkrecover.driver.tasks import taskresume
from sparkrecover.journal import events as ev
from sparkrecover.jvm import WRITING_PROPERTY
from sparkrecover.kinds import Verdict
from sparkrecover.rundir import manifests, storage
from sparkrecover.rundir.plans import PlanEntry

# (fsspec URL, Spark path) of each output a stage commits.
Outputs = Sequence[tuple[str, str | None]]


class StageKind(Protocol):
    """What one kind of stage tells the lifecycle."""

    name: str
    kind: str  # checkpoint, stage or write: the journal's word
    spark: Any  # the session (or, for an RDD save, what stands in for it)
    version: str | None  # the user's version= (§4 rule 5)

    def outputs(self) -> list[str]:
        """fsspec URLs of the outputs known before it runs."""
        ...

    def reads(self) -> tuple[Any, Any, list[str]]:
        """(function to fingerprint or None, DataFrame or None, the files it reads)."""
        ...

    def skip_problem(self, entry: PlanEntry) -> str | None:
        """Why a committed stage cannot be skipped although the plan says so (beyond staleness)."""
        ...

    def skipped(self, entry: PlanEntry, lost: bool) -> Any:
        """Put back what the script may read next; the stage's result."""
        ...

    def invalidated(self, entry: PlanEntry, reason: str) -> PlanEntry:
        """The plan entry to run with after a skip was refused."""
        ...

    def set_aside(self, entry: PlanEntry) -> taskresume.TaskPlan | None:
        """Task-level resume, before anything is cleaned: the partitions this write keeps."""
        ...

    def clean(self, entry: PlanEntry) -> dict[str, Any]:
        """Remove what an earlier attempt left; the extra fields of ``stage.started``."""
        ...

    def execute(self, tasks: taskresume.TaskPlan | None) -> Any:
        """The stage's work; its result."""
        ...

    def committed(self) -> tuple[Outputs, dict[str, Any], list[dict[str, Any]] | None]:
        """(outputs, extra fields of ``stage.committed``, what each output held before an append)."""
        ...


def run(rt: runtime.Runtime, stage: StageKind) -> Any:
    rt.reach(stage.name)
    entry = rt.decision(stage.name) or PlanEntry(stage.name, Verdict.RUN, "not in the plan", kind=stage.kind)
    with Scope(rt, stage.spark, stage.name) as scope:
        upstream, fingerprint, stale = fingerprint_of(rt, entry, stage)
        if entry.decision == Verdict.LOST:
            # Not needed by anything the plan runs: not rebuilt (writing it again could append
            # twice). Should a later stage read it after all, Spark recomputes it from lineage.
            recorded = entry.fingerprint_digest
            scope.skip(entry.reason + (f"; {stale}" if stale else ""), stage.outputs(), None)
            rt.fingerprints[stage.name] = recorded if recorded and not stale else fingerprint["digest"]
            return stage.skipped(entry, lost=True)
        if entry.decision == Verdict.SKIP:
            stale = stale or stage.skip_problem(entry)
            if stale is None:
                scope.skip(entry.reason, stage.outputs(), entry.fingerprint_digest)
                return stage.skipped(entry, lost=False)
            scope.invalidate(stale)
            entry = stage.invalidated(entry, stale)
        if entry.decision == Verdict.CONTINUE and stale is not None:
            # Changed since its tasks committed: partition i would not hold the same rows (§4 rule 5).
            scope.invalidate(stale)
            entry = replace(entry, decision=Verdict.RUN, tasks=None, partitions=None)
        tasks = stage.set_aside(entry)
        extra = stage.clean(entry)
        scope.start(stage.kind, stage.outputs(), upstream, fingerprint, **extra)
        result = stage.execute(tasks)
        outputs, extra, added_since = stage.committed()
        scope.commit(outputs, upstream, added_since=added_since, **extra)
        rt.add_outputs(stage.name, [url for url, _ in outputs])
    return result


def fingerprint_of(
    rt: runtime.Runtime, entry: PlanEntry, stage: StageKind
) -> tuple[list[str], dict[str, Any], str | None]:
    """(upstream stages, the stage's fingerprint now, why it is stale or None)."""
    fn, frame, files = stage.reads()
    upstream, external = rt.split_inputs(files, exclude=stage.name)
    ignore: tuple[str, ...] = ()
    if any(rt.is_lost(parent) or rt.is_superseded(parent) for parent in entry.upstream):
        # A lost upstream is read through its lineage, not its files: its edge no longer shows in
        # the files read, and the plan and inputs differ for that reason alone. So does one whose
        # output a later stage changed (a table read, then dropped): the planner reruns it when
        # this stage must run, so only a skip of this stage meets it here.
        upstream, ignore = list(entry.upstream), ("plan", "input")
    fingerprint = fingerprints.build(
        version=stage.version,
        fn=fn,
        frame=frame,
        input_urls=external,
        upstream=rt.upstream_fingerprints(upstream),
    )
    stale = staleness.difference(entry.fingerprint, fingerprint, ignore)
    return upstream, fingerprint, stale


def qualify(spark: Any, path: str) -> tuple[str, str]:
    """(fsspec URL, Spark path) of a path as Spark resolves it (relative, file:, s3a://, hdfs://)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    qualified = fs.makeQualified(hadoop_path).toString()
    return storage.from_spark_path(qualified), qualified


class Scope:
    """Attributes the Spark jobs run inside it to one pipeline stage (a local property), journals
    the stage's events, and records a failure as ``stage.failed``."""

    def __init__(self, rt: runtime.Runtime, spark: Any, name: str):
        self.rt, self.sc, self.name = rt, spark.sparkContext, name
        self.started = time.monotonic()

    def __enter__(self) -> Scope:
        self._previous = (
            self.sc.getLocalProperty(runtime.STAGE_PROPERTY),
            self.sc.getLocalProperty("spark.job.description"),
            self.sc.getLocalProperty(WRITING_PROPERTY),
        )
        self.sc.setLocalProperty(runtime.STAGE_PROPERTY, self.name)
        self.sc.setJobDescription(f"sparkrecover stage {self.name}")
        self.rt.enter_stage()  # writes made in here are this stage's, not implicit stages
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        self.rt.leave_stage()
        # A driver being stopped by a signal is ending: no call into the JVM, whose Py4J connection
        # the signal may have cut in the middle of a command, may replace the Stopped the script
        # must see (driver/process/signals.py) with a network error.
        if self.rt.interrupted is None:
            self.sc.setLocalProperty(runtime.STAGE_PROPERTY, self._previous[0])
            self.sc.setLocalProperty("spark.job.description", self._previous[1])
            self.sc.setLocalProperty(WRITING_PROPERTY, self._previous[2])
        if error is not None:
            # A write whose job commit was refused (the lease was taken over while it ran) fails
            # here: the driver ends fenced, with nothing more journaled.
            fence.failed(self.rt, self.name, error)
        # A fenced driver journals nothing more; a stage a signal stopped stays started, as after a
        # SIGKILL, so that a resume continues it (driver/process/signals.py).
        if error is not None and not self.rt.fenced and self.rt.interrupted is None:
            message = str(error).strip() or type(error).__name__
            self.rt.writer.emit(ev.STAGE_FAILED, stage=self.name, error=message[:4000], error_type=type(error).__name__)
            self.rt.writer.flush()

    def start(self, kind: str, urls: list[str], upstream: list[str], fingerprint: dict[str, Any], **extra: Any) -> None:
        fence.check(self.rt, self.name, "writing")  # nothing is written under a lost lease
        self.rt.writer.emit(
            ev.STAGE_STARTED,
            stage=self.name,
            kind=kind,
            outputs=urls,
            upstream=upstream,
            fingerprint=fingerprint,
            **extra,
        )
        self.rt.add_outputs(self.name, urls)
        self.rt.fingerprints[self.name] = fingerprint["digest"]
        # From here on a job's result tasks are the stage's writes (the JVM listener journals each
        # commit); the jobs it ran before (a write's probe, adaptive execution's) committed nothing.
        self.sc.setLocalProperty(WRITING_PROPERTY, self.name)

    def skip(self, reason: str, urls: list[str], digest: str | None) -> None:
        self.rt.writer.emit(ev.STAGE_SKIPPED, stage=self.name, reason=reason)
        self.rt.add_outputs(self.name, urls)
        if digest:
            self.rt.fingerprints[self.name] = digest

    def invalidate(self, reason: str) -> None:
        """The plan said skip or continue, but something the stage depends on changed: it runs (§4 rule 5)."""
        self.rt.writer.emit(ev.STAGE_INVALIDATED, stage=self.name, reason=reason)

    def commit(
        self,
        outputs: Outputs,
        upstream: list[str],
        added_since: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> None:
        """``added_since``: what each output held before an append; its manifest then lists only
        the files the append added."""
        fence.check(self.rt, self.name, "the commit")  # the lease, before anything is journaled
        manifest = [manifests.build_output(url, spark_path, self.rt.checksums) for url, spark_path in outputs]
        if added_since is not None:
            manifest = [
                manifests.added_files(output, before) for output, before in zip(manifest, added_since, strict=True)
            ]
        manifest, ref, digest = manifests.externalize(self.name, manifest, self.rt.run_dir)
        self.rt.sync_telemetry()
        self.rt.writer.emit(
            ev.STAGE_COMMITTED,
            stage=self.name,
            manifest=manifest,
            manifest_ref=ref,
            manifest_sha256=digest,
            duration_s=round(time.monotonic() - self.started, 3),
            spark_jobs=self.rt.jobs_of(self.name),
            upstream=upstream,
            **extra,
        )
