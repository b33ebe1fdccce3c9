"""``plans/<attempt>.json``: the plan a resumed attempt was launched with.

One definition of the plan, on both sides of the process boundary: the command line builds
``Plan`` and ``PlanEntry`` objects (core/verdicts/planner.py) and stores ``encode(plan)``; the driver reads the
bytes back into the same types with ``read_plan``, which decodes them from the types' own fields
and hints (rundir/decoding.py) and refuses a plan it cannot read, a field missing, unknown or of
the wrong type (``FormatError``, exit 3). A plan is pure data (docs/design.md §4 rule 8): read
with ``orjson``, never executed or unpickled. No I/O here: the core builds plans too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from sparkrecover.errors import FormatError
from sparkrecover.kinds import MODEL_ACTIONS, Verdict
from sparkrecover.rundir import decoding, formats


@dataclass
class Committed:
    """What a committed stage left, as the driver reads it back (a skipped checkpoint) or
    undoes it (an implicit append that runs again)."""

    attempt: int
    paths: list[str]  # the outputs as Spark names them
    format: str | None = None
    schema: str | None = None  # Spark's JSON of the written schema
    table: dict[str, Any] | None = None  # how a table write registers its table again (driver/recording/tables.py)
    # The manifest of an implicit write, inline or by reference (rundir/manifests.py).
    manifest: list[dict[str, Any]] | None = None
    manifest_ref: str | None = None
    manifest_sha256: str | None = None
    # A later committed stage changed this output since (a table inserted into, dropped).
    superseded_by: str | None = None

    def manifest_record(self) -> dict[str, Any]:
        """The fields ``manifests.load_manifest`` reads."""
        return {"manifest": self.manifest, "manifest_ref": self.manifest_ref, "manifest_sha256": self.manifest_sha256}


@dataclass
class KeptTasks:
    """For ``continue``: what the driver needs to keep an unfinished write's committed partitions."""

    kept: list[int]  # partitions whose committed task output is kept
    partitions: int  # the write's partition count, which the resumed write must run again
    shape: str | None = None  # digest of the write's shape when they committed (driver/tasks/partitions.py)
    # Digest of the post-shuffle partition specs they were committed under (None: no shuffle read).
    specs: str | None = None
    empty: list[int] = field(default_factory=list)  # kept partitions that wrote no rows


@dataclass
class PartitionCount:
    kept: int
    total: int


@dataclass
class PlanEntry:
    """What resume decided for one stage, and what the driver needs to carry it out."""

    stage: str
    decision: Verdict
    reason: str
    kind: str = "stage"  # checkpoint, stage or write
    upstream: list[str] = field(default_factory=list)
    # For skip and lost: how the driver reads a checkpoint back, registers a table, undoes an append.
    committed: Committed | None = None
    # For run and rerun: what each output held before the previous write (manifest records), so
    # the driver removes what an unfinished or superseded write left behind (§4 rule 2).
    restore: list[dict[str, Any]] = field(default_factory=list)
    # For skip and continue: the fingerprint recorded when the stage ran (§4 rule 5).
    fingerprint: dict[str, Any] | None = None
    partitions: PartitionCount | None = None  # for continue
    tasks: KeptTasks | None = None  # for continue
    # For a stage that runs: map tasks of the shuffles it ran, and how many of their outputs are
    # kept and offered to the next attempt (Plan.shuffles, docs/shuffles.md).
    shuffle_maps: PartitionCount | None = None

    @property
    def fingerprint_digest(self) -> str | None:
        digest = (self.fingerprint or {}).get("digest")
        return digest if isinstance(digest, str) and digest else None

    @property
    def superseded(self) -> bool:
        """Skipped, but a later stage of the run changed its output: its files are no longer what
        its readers read."""
        return self.decision == Verdict.SKIP and bool(self.committed and self.committed.superseded_by)

    def summary(self) -> dict[str, Any]:
        """The entry as ``resume --dry-run --json`` shows it."""
        shown: dict[str, Any] = {"stage": self.stage, "decision": str(self.decision), "reason": self.reason}
        if self.partitions is not None:
            shown["partitions"] = asdict(self.partitions)
        if self.shuffle_maps is not None:
            shown["shuffle_maps"] = asdict(self.shuffle_maps)
        return shown


@dataclass
class SchemaEntry:
    """An inferred schema the next attempt may reuse (core/verdicts/schema_reuse.py,
    driver/recording/schema_reads.py)."""

    key: str
    format: str
    paths: list[str]
    call_site: str | None
    attempt: int
    schema: dict[str, Any]  # Spark's JSON of the StructType
    input_digest: str
    input_count: int = 0
    reason: str = ""

    def summary(self) -> dict[str, Any]:
        """As ``resume --dry-run --json`` shows it (the schema itself stays in the plan file)."""
        return {key: getattr(self, key) for key in ("key", "format", "paths", "call_site", "attempt", "reason")}

    def describe(self) -> str:
        """One line for people: ``reuse the schema of json /data/raw (inputs unchanged)``."""
        return f"reuse the schema of {self.format} {' '.join(self.paths)} ({self.reason})"


@dataclass
class ActionEntry:
    """A recorded action and whether the next attempt may answer it from its result file
    (core/verdicts/action_reuse.py decides, driver/recall/ replays)."""

    key: str  # "etl.py:12#1 count()": call site, ordinal, the action and its arguments
    kind: str
    call_site: str
    attempt: int  # the attempt that ran it
    replay: bool
    reason: str  # why it may be replayed, or why it runs again
    fingerprint: dict[str, Any] | None = None
    path: str | None = None  # the result file, relative to the run directory
    sha256: str | None = None
    bytes: int = 0
    rows: int | None = None
    duration_s: float = 0.0  # what running it took: what a replay saves

    def summary(self) -> dict[str, Any]:
        """As ``resume --dry-run --json`` shows it."""
        shown = {key: getattr(self, key) for key in ("key", "kind", "call_site", "attempt", "reason")}
        shown["decision"] = ("load" if self.kind in MODEL_ACTIONS else "replay") if self.replay else "run"
        return shown


@dataclass
class KeptMap:
    """One kept shuffle map output, as its ``shuffle.committed`` record describes it."""

    map: int  # the map task's index
    path: str  # its folder under <run dir>/shuffles/
    data_bytes: int
    index_bytes: int
    records: int
    row_bytes: int


@dataclass
class KeptShuffle:
    """The kept map outputs of one shuffle identity that the next attempt may reuse
    (core/fold/kept_shuffles.py, sparkrecover/jvm/shuffle/KeepingShuffleManager.java)."""

    shuffle: str  # the identity
    stage: str | None
    maps: list[KeptMap] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"shuffle": self.shuffle, "stage": self.stage, "kept": len(self.maps)}


@dataclass
class Plan:
    run: str
    attempt: int
    stages: list[PlanEntry] = field(default_factory=list)
    schemas: list[SchemaEntry] = field(default_factory=list)
    shuffles: list[KeptShuffle] = field(default_factory=list)
    actions: list[ActionEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def entry(self, stage: str) -> PlanEntry | None:
        return next((entry for entry in self.stages if entry.stage == stage), None)


def encode(plan: Plan) -> bytes:
    """The plan file's bytes (``plans/<attempt>.json``), its format version first."""
    return orjson.dumps(formats.stamped(formats.PLAN, plan.to_json()), option=orjson.OPT_INDENT_2)


def read_plan(raw: bytes, where: str) -> Plan:
    """The plan in a plan file's bytes; ``where`` names the file in errors."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise FormatError(f"{where}: the plan is not valid JSON: {error}") from None
    return parse_plan(formats.checked(formats.PLAN, document, where), where)


def parse_plan(document: dict[str, Any], where: str = "plan") -> Plan:
    """The plan in ``document`` (a plan file's JSON, its version checked), checked field by field
    against the types above (rundir/decoding.py)."""
    plan: Plan = decoding.decode(Plan, {key: value for key, value in document.items() if key != "v"}, where)
    return plan
