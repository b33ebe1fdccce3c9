"""Spark scheduler events into the journal, attributed to pipeline stages (docs/design.md §6).

This is the Py4J listener: a Python object the JVM calls back for every listener event. It runs
on its own listener queue so that a slow callback can never make Spark drop other listeners'
events. Scheduler events are telemetry: nothing here may change a plan (§4 rule 6), so every
handler swallows its own errors.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sparkrecover.driver.process import messages
from sparkrecover.driver.process.runtime import STAGE_PROPERTY, Runtime
from sparkrecover.journal import events as ev
from sparkrecover.jvm import KEPT_PROPERTY, WRITING_PROPERTY

QUEUE_NAME = "sparkrecover"


def _stage_of(properties: Any) -> str | None:
    if properties is None:
        return None
    return properties.getProperty(STAGE_PROPERTY)


def _kept_of(properties: Any) -> set[int] | None:
    """The partitions a writing job keeps; None for a job no stage's work started (the rule of
    SparkRecoverListener.keptOf)."""
    if properties is None or properties.getProperty(WRITING_PROPERTY) is None:
        return None
    listed = properties.getProperty(KEPT_PROPERTY) or ""
    return {int(item) for item in listed.split(",") if item.strip()}


def _option(value: Any) -> str | None:
    return value.get() if value is not None and value.isDefined() else None


class JournalListener:
    """Implements org.apache.spark.scheduler.SparkListenerInterface through Py4J."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.stage_of_spark_stage: dict[int, str | None] = {}
        self.stage_of_job: dict[int, str | None] = {}
        self.failed_tasks: dict[tuple[int, int], int] = {}
        self.job_of_spark_stage: dict[int, int] = {}  # jobs run inside a pipeline stage only
        self.kept_of_writing_stage: dict[int, set[int]] = {}  # Spark stages of jobs a stage's work started
        self.closed = False  # set at driver end: Spark keeps calling back, nothing is journaled

    def _emit(self, event_type: str, /, **payload: Any) -> None:
        if not self.closed:
            self.rt.writer.append(event_type, payload)

    def onJobStart(self, event: Any) -> None:
        try:
            stage = _stage_of(event.properties())
            job_id = event.jobId()
            self.rt.note_job(stage, job_id)
            self.stage_of_job[job_id] = stage
            if stage is not None:
                ids = event.stageIds()
                for i in range(ids.size()):
                    self.job_of_spark_stage[int(ids.apply(i))] = job_id
            self._emit(ev.SPARK_JOB_STARTED, stage=stage, job=job_id)
        except Exception as error:
            _report(error)

    def onJobEnd(self, event: Any) -> None:
        try:
            result = event.jobResult().toString()
            job_id = event.jobId()
            self._emit(
                ev.SPARK_JOB_ENDED,
                stage=self.stage_of_job.pop(job_id, None),
                job=job_id,
                succeeded=result == "JobSucceeded",
                **({} if result == "JobSucceeded" else {"failure": result[:2000]}),
            )
        except Exception as error:
            _report(error)

    def onStageSubmitted(self, event: Any) -> None:
        try:
            spark_stage = event.stageInfo().stageId()
            self.stage_of_spark_stage[spark_stage] = _stage_of(event.properties())
            kept = _kept_of(event.properties())
            if kept is not None:
                self.kept_of_writing_stage[spark_stage] = kept
        except Exception as error:
            _report(error)

    def onTaskEnd(self, event: Any) -> None:
        try:
            if event.reason().toString() != "Success":
                key = (event.stageId(), event.stageAttemptId())
                self.failed_tasks[key] = self.failed_tasks.get(key, 0) + 1
            elif event.taskType() == "ResultTask":
                self._task_committed(event)
        except Exception as error:
            _report(error)

    def _task_committed(self, event: Any) -> None:
        """A write task the commit coordination accepted (see SparkRecoverListener.taskCommitted)."""
        spark_stage = event.stageId()
        stage = self.stage_of_spark_stage.get(spark_stage)
        kept = self.kept_of_writing_stage.get(spark_stage)
        if stage is None or kept is None:
            return
        info, metrics = event.taskInfo(), event.taskMetrics()
        partition = info.partitionId() if info.partitionId() >= 0 else info.index()
        if partition in kept:
            return
        output = metrics.outputMetrics() if metrics is not None else None
        self._emit(
            ev.TASK_COMMITTED,
            stage=stage,
            spark_job=self.job_of_spark_stage.get(spark_stage),
            spark_stage=spark_stage,
            spark_attempt=event.stageAttemptId(),
            partition=partition,
            task_attempt=info.attemptNumber(),
            **({} if output is None else {"bytes": output.bytesWritten(), "records": output.recordsWritten()}),
        )
        self.rt.writer.flush_soon()  # finished work: on storage before a kill can lose it

    def onStageCompleted(self, event: Any) -> None:
        try:
            info = event.stageInfo()
            spark_stage, spark_attempt = info.stageId(), info.attemptNumber()
            self.kept_of_writing_stage.pop(spark_stage, None)
            metrics = info.taskMetrics()
            figures = {}
            if metrics is not None:
                figures = {
                    "executor_run_time_ms": metrics.executorRunTime(),
                    "input_bytes": metrics.inputMetrics().bytesRead(),
                    "output_bytes": metrics.outputMetrics().bytesWritten(),
                    "output_records": metrics.outputMetrics().recordsWritten(),
                    "shuffle_read_bytes": metrics.shuffleReadMetrics().totalBytesRead(),
                    "shuffle_write_bytes": metrics.shuffleWriteMetrics().bytesWritten(),
                }
            self._emit(
                ev.SPARK_STAGE_COMPLETED,
                stage=self.stage_of_spark_stage.pop(spark_stage, None),
                spark_stage=spark_stage,
                spark_attempt=spark_attempt,
                name=info.name(),
                tasks=info.numTasks(),
                failed_tasks=self.failed_tasks.pop((spark_stage, spark_attempt), 0),
                failure=_option(info.failureReason()),
                metrics=figures,
            )
        except Exception as error:
            _report(error)

    def onExecutorRemoved(self, event: Any) -> None:
        try:
            self._emit(ev.SPARK_EXECUTOR_REMOVED, stage=None, executor=event.executorId(), reason=event.reason())
        except Exception as error:
            _report(error)

    def __getattr__(self, name: str) -> Any:
        # Every other SparkListenerInterface method (there are dozens, more in each Spark
        # release) is accepted and ignored.
        if name.startswith("on"):
            return _ignore
        raise AttributeError(name)

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.scheduler.SparkListenerInterface"]


def _ignore(*_: Any) -> None:
    return None


_reported = False


def _report(error: Exception) -> None:
    global _reported
    if not _reported:
        _reported = True
        messages.say(f"sparkrecover: warning: listener event lost: {type(error).__name__}: {error}")


def register(sc: Any, rt: Runtime) -> JournalListener:
    """Start Py4J's callback server if needed and add the listener on its own queue."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(sc._gateway)
    listener = JournalListener(rt)
    jsc = sc._jsc.sc()
    try:
        jsc.listenerBus().addToQueue(listener, QUEUE_NAME)
    except Exception:
        jsc.addSparkListener(listener)
    return listener
