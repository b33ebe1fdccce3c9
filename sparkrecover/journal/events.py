"""Journal event types (format v1, DESIGN §5): one definition for the writer and the reader.

Every line of the journal is an envelope (``Envelope``) whose extra keys are the payload of its
``type``. The payload shapes below document what each writer puts in; readers must accept
extra keys and unknown types (they are kept and shown, never fatal).
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

SCHEMA_VERSION = 1

WRITER_CLI = "cli"
WRITER_DRIVER = "driver"
WRITERS = (WRITER_CLI, WRITER_DRIVER)

RUN_STARTED = "run.started"
ATTEMPT_STARTED = "attempt.started"
PLAN_CREATED = "plan.created"
DRIVER_STARTED = "driver.started"
STAGE_STARTED = "stage.started"
STAGE_COMMITTED = "stage.committed"
STAGE_SKIPPED = "stage.skipped"
STAGE_INVALIDATED = "stage.invalidated"
STAGE_FAILED = "stage.failed"
SPARK_JOB_STARTED = "spark.job.started"
SPARK_JOB_ENDED = "spark.job.ended"
SPARK_STAGE_COMPLETED = "spark.stage.completed"
SPARK_EXECUTOR_REMOVED = "spark.executor.removed"
SPARK_EVENTS_DROPPED = "spark.events.dropped"
# Coordinator events (task-level progress, DESIGN §4a).
WRITE_STARTED = "write.started"
TASK_COMMITTED = "task.committed"
JOURNAL_DEGRADED = "journal.degraded"
DRIVER_ENDED = "driver.ended"
ATTEMPT_ENDED = "attempt.ended"

# Events the writer flushes (and fsyncs) at once instead of leaving them in the buffer: commits
# (DESIGN §4 rule 1), the ends of processes, and the starts and failures of stages so that a crash
# right after them still shows what was under way. Each happens a handful of times per stage.
URGENT_TYPES = frozenset({STAGE_STARTED, STAGE_COMMITTED, STAGE_FAILED, DRIVER_ENDED, ATTEMPT_ENDED,
                          RUN_STARTED, ATTEMPT_STARTED})

ENVELOPE_KEYS = ("v", "type", "run", "attempt", "writer", "seq", "ts")


class Envelope(TypedDict):
    v: int
    type: str
    run: str
    attempt: int
    writer: Literal["cli", "driver"]
    seq: int
    ts: str


class RunStartedPayload(TypedDict, total=False):
    app: str                     # the user's script, as given
    app_args: list[str]
    spark_submit_args: list[str]  # options before the app, redacted
    spark_submit: str            # the spark-submit that was used
    cwd: str
    user: str
    host: str
    versions: dict[str, str]


class AttemptStartedPayload(TypedDict, total=False):
    pid: int
    command: list[str]  # the spark-submit command line, redacted


class PlanCreatedPayload(TypedDict, total=False):
    plan: str  # path of plans/<attempt>.json relative to the run directory
    stages: list[dict[str, Any]]


class DriverStartedPayload(TypedDict, total=False):
    app_id: str
    master: str
    deploy_mode: str
    spark_version: str
    pid: int
    listener: Literal["jvm", "py4j"] | None  # which listener journals Spark's events


class Output(TypedDict, total=False):
    path: str            # an fsspec URL
    spark_path: str      # the same place as Spark names it (s3a://, file:/...)
    files: list[list[Any]]  # [relative path, size] pairs; absent when stored in manifests/
    file_count: int
    bytes: int
    success: bool        # a _SUCCESS marker was present at commit
    scope: str           # "added": only the files an append added (other files are not its own)


class StageStartedPayload(TypedDict, total=False):
    stage: str
    kind: Literal["checkpoint", "stage", "write"]  # "write": an implicit stage (zero-code mode)
    fingerprint: dict[str, Any]
    outputs: list[str]
    before: list[Output]  # what the outputs held before this attempt wrote (for clean reruns)
    upstream: list[str]
    # Implicit stages only: where the write was called, what it wrote to and how.
    call_site: str        # "file:line"
    ordinal: int          # 1 for the first write of this target and mode at this call site
    target: str           # a path, "table NAME" or "<format> sink"
    mode: str             # errorifexists, ignore, overwrite, append, or the DataFrameWriterV2 method
    verifiable: bool      # False: no path or table location to check (e.g. a JDBC sink)


class StageCommittedPayload(TypedDict, total=False):
    stage: str
    manifest: list[Output]
    manifest_ref: str | None     # manifests/<stage>.json when the file lists were too large
    manifest_sha256: str | None
    format: str | None
    schema: str | None           # Spark schema JSON, to read a checkpoint back without inference
    rows: int | None
    duration_s: float
    spark_jobs: list[int]
    upstream: list[str]


class StageSkippedPayload(TypedDict, total=False):
    stage: str
    reason: str


class StageFailedPayload(TypedDict, total=False):
    stage: str
    error: str
    error_type: str


class SparkStageCompletedPayload(TypedDict, total=False):
    stage: str | None
    spark_stage: int
    spark_attempt: int
    name: str
    tasks: int            # tasks of the Spark stage attempt
    completed_tasks: int  # task ends as Spark's status store counts them (JVM listener only)
    failed_tasks: int
    killed_tasks: int
    failure: str | None
    # JVM listener: summed over successful tasks (duration_ms is the stage attempt's wall time,
    # longest_task_ms and peak_execution_memory_bytes are maxima); Py4J listener: Spark's own.
    metrics: dict[str, int]


class SparkEventsDroppedPayload(TypedDict, total=False):
    stage: None
    dropped: int               # Spark's cumulative count over all listener queues
    queues: dict[str, int]     # the same per queue (shared, appStatus, eventLog, ...)
    listener_overflow: int     # lines the JVM listener could not buffer (nobody drained them)


class WriteStartedPayload(TypedDict, total=False):
    stage: str
    partitions: int      # tasks the write runs (driver/partitions.py WriteShape.partitions)
    staging: str         # the committer's job attempt folder, <out>/_temporary/0, as Spark names it
    shape: str           # WriteShape.digest: partition count and each partition's input slices
    reusable: bool       # partition i holds the same rows in another application
    reason: str | None   # why not, when not reusable


class TaskCommittedPayload(TypedDict, total=False):
    stage: str           # the pipeline stage the write ran for
    spark_job: int | None
    spark_stage: int
    spark_attempt: int   # the Spark stage attempt
    partition: int       # the Spark partition id (= Hadoop TaskID id of the write task)
    task_attempt: int    # the task attempt number ("attempt" is the envelope's: the sparkrecover attempt)
    bytes: int           # outputMetrics.bytesWritten
    records: int         # outputMetrics.recordsWritten


class DriverEndedPayload(TypedDict, total=False):
    exit_code: int
    error: str | None
    listener: Literal["jvm", "py4j"] | None
    spark_events_dropped: int | None  # None when no SparkContext was created


class AttemptEndedPayload(TypedDict, total=False):
    exit_code: int
    signal: int | None
