"""Journal event types (format v1, docs/design.md §5): one definition for the writer and the reader.

Every line of the journal is an envelope (``ENVELOPE``) whose other keys are the payload of its
``type``. ``REQUIRED`` names the payload fields readers rely on; ``record_problem`` is the one
check of a record that the reader (and so ``inspect``, ``resume``, ``--follow``) and
``replay --verify`` all apply. Readers accept extra keys and unknown types (kept and shown,
never fatal). docs/journal.md describes every event's payload.
"""

from __future__ import annotations

import re
from typing import Any

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
# An executor the driver did not let go (killed, out of memory, its node gone): its map outputs
# are computed again, or served from kept copies (shuffle.served). docs/shuffles.md.
EXECUTOR_LOST = "executor.lost"
SPARK_EVENTS_DROPPED = "spark.events.dropped"
JOURNAL_DEGRADED = "journal.degraded"
DRIVER_ENDED = "driver.ended"
ATTEMPT_ENDED = "attempt.ended"
# Coordinator events (task-level progress inside a write, docs/design.md §4a).
WRITE_STARTED = "write.started"
TASK_COMMITTED = "task.committed"
LEASE_LOST = "lease.lost"
# Reads whose schema Spark infers with a pass over the data: what an attempt inferred,
# and what a resumed attempt took from the plan instead of inferring again.
SCHEMA_INFERRED = "schema.inferred"
SCHEMA_REUSED = "schema.reused"
# Actions (count, collect, show, ...): an action that ran, with its result kept in a file or why
# not, and an action a resumed attempt answered from that file instead of running it (§4c).
ACTION_RECORDED = "action.recorded"
ACTION_REPLAYED = "action.replayed"
# Shuffle map outputs kept across driver death (docs/shuffles.md): a shuffle the shuffle manager
# identified (and how many kept map outputs it reused), map outputs kept (batched), and a shuffle
# or an attempt whose map outputs cannot be kept, with the reason.
SHUFFLE_REGISTERED = "shuffle.registered"
SHUFFLE_COMMITTED = "shuffle.committed"
SHUFFLE_UNSUPPORTED = "shuffle.unsupported"
# A lost executor's map outputs of one shuffle answered from the kept copies in the running
# application (``served``: map indexes), and those computed again, their copy not yet durable.
SHUFFLE_SERVED = "shuffle.served"

# Events the writer flushes (and fsyncs) at once instead of leaving them in the buffer: commits
# (docs/design.md §4 rule 1), the ends of processes, and the starts and failures of stages so that a
# crash right after them still shows what was under way. Each happens a handful of times per stage.
URGENT_TYPES = frozenset(
    {STAGE_STARTED, STAGE_COMMITTED, STAGE_FAILED, DRIVER_ENDED, ATTEMPT_ENDED, RUN_STARTED, ATTEMPT_STARTED}
)

ENVELOPE = (("v", int), ("type", str), ("run", str), ("attempt", int), ("writer", str), ("seq", int), ("ts", str))
ENVELOPE_KEYS = tuple(key for key, _ in ENVELOPE)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

# Payload fields (and their types) that readers index: a record without them is corruption, the
# same for every command. Spark telemetry carries its pipeline stage too, but may say null.
_STAGE = (("stage", str),)
REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    STAGE_STARTED: _STAGE,
    STAGE_COMMITTED: _STAGE,
    STAGE_SKIPPED: _STAGE,
    STAGE_INVALIDATED: _STAGE,
    STAGE_FAILED: _STAGE,
    WRITE_STARTED: (("stage", str), ("partitions", int)),
    TASK_COMMITTED: (("stage", str), ("partition", int)),
    # The fold keeps the latest schema per key, and the plan hands it back checked by input_digest.
    SCHEMA_INFERRED: (("key", str), ("format", str), ("schema", dict), ("input_digest", str)),
    SCHEMA_REUSED: (("key", str),),
    # The fold keeps the latest record per key; the plan hands back its result file and digest.
    ACTION_RECORDED: (("key", str), ("kind", str)),
    ACTION_REPLAYED: (("key", str), ("kind", str)),
    SHUFFLE_REGISTERED: (("shuffle", str), ("maps", int), ("reduces", int)),
    SHUFFLE_COMMITTED: (("shuffle", str), ("maps", list)),
    SHUFFLE_UNSUPPORTED: (("reason", str),),
    EXECUTOR_LOST: (("executor", str),),
}


def payload_problem(record: dict[str, Any]) -> str | None:
    """What a record of a known type lacks of the payload readers rely on, or None."""
    for key, kind in REQUIRED.get(record["type"], ()):
        value = record.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return (
                f"{record['type']} event without {key!r}"
                if value is None
                else f"{record['type']} event whose {key!r} is not a {kind.__name__}: {value!r}"
            )
    return None


def record_problem(record: Any, attempt: int, writer: str, *, strict: bool = False) -> str | None:
    """What makes a record of the segment of ``attempt``/``writer`` unreadable, or None.

    ``strict`` (``replay --verify``) also checks what readers can do without: the timestamp's
    exact form and a non-negative seq.
    """
    if not isinstance(record, dict):
        return "not a JSON object"
    version = record.get("v")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return f"written in journal format v{version}; this sparkrecover reads v{SCHEMA_VERSION}"
    missing = [key for key in ENVELOPE_KEYS if key not in record]
    if missing:
        return f"missing envelope field {missing[0]!r}"
    if version != SCHEMA_VERSION:
        return f"unknown journal format version {version!r}"
    for key, kind in ENVELOPE:
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            return f"envelope field {key!r} is not a {kind.__name__}: {record[key]!r}"
    if (record["attempt"], record["writer"]) != (attempt, writer):
        return f"record of attempt {record['attempt']}/{record['writer']} in a segment of attempt {attempt}/{writer}"
    if strict:
        if record["seq"] < 0:
            return f"negative seq {record['seq']}"
        if not TIMESTAMP.match(record["ts"]):
            return f"timestamp {record['ts']!r} is not UTC ISO 8601 with milliseconds"
    return payload_problem(record)
