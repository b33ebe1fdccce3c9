"""The Python API used inside a Spark application (DESIGN §3): ``checkpoint`` and ``stage``.

Under ``sparkrecover submit`` each call journals ``stage.started`` before any output is written
and ``stage.committed`` only after Spark's job commit returned (rule 1), and follows the plan of
a resumed attempt. Anywhere else it runs everything and records nothing.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sparkrecover.core import staleness
from sparkrecover.driver import fence, fingerprints, runtime, taskresume
from sparkrecover.errors import UsageError
from sparkrecover.journal import events as ev
from sparkrecover.rundir import manifests, storage

_NAME = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or name.strip() != name or name in (".", ".."):
        raise UsageError(f"invalid stage name {name!r}: use 1-200 printable characters without '/'")
    return name


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    return session if session is not None else SparkSession.builder.getOrCreate()


def _qualify(spark: Any, path: str) -> tuple[str, str]:
    """(fsspec URL, Spark path) of a path as Spark resolves it (relative, file:, s3a://, hdfs://)."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    qualified = fs.makeQualified(hadoop_path).toString()
    return storage.from_spark_path(qualified), qualified


class _StageScope:
    """Attributes the Spark jobs run inside it to one pipeline stage (a local property) and
    records failures as ``stage.failed``."""

    def __init__(self, rt: runtime.Runtime, spark: Any, name: str):
        self.rt, self.sc, self.name = rt, spark.sparkContext, name
        self.started = time.monotonic()

    def __enter__(self) -> _StageScope:
        self._previous = (
            self.sc.getLocalProperty(runtime.STAGE_PROPERTY),
            self.sc.getLocalProperty("spark.job.description"),
        )
        self.sc.setLocalProperty(runtime.STAGE_PROPERTY, self.name)
        self.sc.setJobDescription(f"sparkrecover stage {self.name}")
        self.rt.enter_stage()  # writes made in here are this stage's, not implicit stages
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        self.rt.leave_stage()
        self.sc.setLocalProperty(runtime.STAGE_PROPERTY, self._previous[0])
        self.sc.setLocalProperty("spark.job.description", self._previous[1])
        if error is not None:
            # A write whose job commit was refused (the lease was taken over while it ran) fails
            # here: the driver ends fenced, with nothing more journaled.
            fence.failed(self.rt, self.name, error)
        if error is not None and not self.rt.fenced:  # a fenced driver journals nothing more
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

    def skip(self, reason: str, urls: list[str], digest: str | None) -> None:
        self.rt.writer.emit(ev.STAGE_SKIPPED, stage=self.name, reason=reason)
        self.rt.add_outputs(self.name, urls)
        if digest:
            self.rt.fingerprints[self.name] = digest

    def invalidate(self, reason: str) -> None:
        """The plan said skip, but something the stage depends on changed: it runs (rule 5)."""
        self.rt.writer.emit(ev.STAGE_INVALIDATED, stage=self.name, reason=reason)

    def commit(
        self,
        outputs: Sequence[tuple[str, str | None]],
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
    rt.reach(name)
    spark = build.sparkSession if not callable(build) else _active_session()
    entry = rt.decision(name) or {}
    if entry.get("decision") == "lost":
        # Not needed by anything the plan runs: not rebuilt. Should some stage use it after all,
        # Spark recomputes it from its lineage, so the result stays right.
        frame = build() if callable(build) else build
        _, fingerprint, stale = _fingerprint(rt, entry, name, build, frame, frame.inputFiles(), version)
        recorded = (entry.get("fingerprint") or {}).get("digest")
        rt.fingerprints[name] = recorded if recorded and not stale else fingerprint["digest"]
        rt.writer.emit(ev.STAGE_SKIPPED, stage=name, reason=entry["reason"] + (f"; {stale}" if stale else ""))
        return frame
    if path is None:
        url = rt.checkpoint_url(name)
        spark_path = storage.to_spark_path(url)
    else:
        url, spark_path = _qualify(spark, path)
    with _StageScope(rt, spark, name) as scope:
        frame = build() if callable(build) else build
        upstream, fingerprint, stale = _fingerprint(rt, entry, name, build, frame, frame.inputFiles(), version)
        if entry.get("decision") == "skip":
            if stale is None:
                committed = entry["committed"]
                scope.skip(
                    entry["reason"],
                    [storage.from_spark_path(p) for p in committed["paths"]],
                    (entry.get("fingerprint") or {}).get("digest"),
                )
                return _read_checkpoint(
                    spark, committed["paths"][0], committed.get("format") or format, committed.get("schema")
                )
            scope.invalidate(stale)
        entry = taskresume.unless_stale(scope, entry, stale)
        # Task-level resume: the committed tasks of a checkpoint that died mid-write are set
        # aside before the overwrite deletes its folder.
        target = taskresume.Target(frame, spark, url, spark_path, "overwrite", format)
        tasks = taskresume.prepare(target, entry)
        scope.start("checkpoint", [url], upstream, fingerprint)
        writer = frame.write.mode("overwrite").format(format)
        if tasks is not None:
            taskresume.started(rt, name, target, tasks)
            taskresume.run(target, tasks, writer, lambda: writer.save(spark_path))
        else:
            writer.save(spark_path)
        schema = frame.schema.json()
        scope.commit([(url, spark_path)], upstream, format=format, schema=schema)
    return _read_checkpoint(spark, spark_path, format, schema)


def _fingerprint(
    rt: runtime.Runtime, entry: dict[str, Any], name: str, fn: Any, frame: Any, files: list[str], version: str | None
) -> tuple[list[str], dict[str, Any], str | None]:
    """(upstream stages, the stage's fingerprint now, why it is stale or None)."""
    upstream, external = rt.split_inputs(files, exclude=name)
    ignore: tuple[str, ...] = ()
    recorded_upstream = list(entry.get("upstream") or [])
    if any(rt.is_lost(parent) or rt.is_superseded(parent) for parent in recorded_upstream):
        # A lost upstream is read through its lineage, not its files: its edge no longer shows in
        # the files read, and the plan and inputs differ for that reason alone. So does one whose
        # output a later stage changed (a table read, then dropped): the planner reruns it when
        # this stage must run, so only a skip of this stage meets it here.
        upstream, ignore = recorded_upstream, ("plan", "input")
    fingerprint = fingerprints.build(
        version=version,
        fn=fn if callable(fn) else None,
        frame=frame,
        input_urls=external,
        upstream=rt.upstream_fingerprints(upstream),
    )
    stale = staleness.difference(entry.get("fingerprint"), fingerprint, ignore)
    return upstream, fingerprint, stale


def _read_checkpoint(spark: Any, spark_path: str, format: str, schema_json: str | None) -> Any:
    reader = spark.read.format(format)
    if schema_json:
        # A recorded schema (pure data, rule 8) spares Spark a schema-inference job.
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
        rt.reach(self.name)
        spark = _active_session()
        located = [_qualify(spark, path) for path in self.outputs]
        urls = [url for url, _ in located]
        entry = rt.decision(self.name) or {}
        if entry.get("decision") == "lost":
            rt.writer.emit(ev.STAGE_SKIPPED, stage=self.name, reason=entry["reason"])
            rt.add_outputs(self.name, urls)
            return None
        upstream, fingerprint, stale = _fingerprint(
            rt, entry, self.name, self.fn, None, _files_read_by(self.fn, args, kwargs), self.version
        )
        with _StageScope(rt, spark, self.name) as scope:
            if entry.get("decision") == "skip":
                if stale is None:
                    scope.skip(entry["reason"], urls, (entry.get("fingerprint") or {}).get("digest"))
                    return None
                scope.invalidate(stale)
            entry = taskresume.unless_stale(scope, entry, stale)
            expected = None
            if len(located) == 1:
                # Its write to its one output keeps the committed tasks of an unfinished attempt:
                # set aside now, before the restore below cleans the output.
                expected = taskresume.ExpectedWrite(self.name, entry, *located[0])
                taskresume.set_aside(expected.url, entry)
            for before in entry.get("restore") or []:
                manifests.restore_output(before)  # rule 2: no data left twice by an earlier write
            before = [manifests.build_output(url, spark_path) for url, spark_path in located]
            scope.start("stage", urls, upstream, fingerprint, before=before)
            rt.expect_write(expected)
            try:
                result = self.fn(*args, **kwargs)
            finally:
                rt.expect_write(None)
            scope.commit(located, upstream)
        return result


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
