"""``plans/<attempt>.json``: the plan a resumed attempt was launched with.

One definition of the plan, on both sides of the process boundary: the command line builds
``Plan`` and ``PlanEntry`` objects (core/planner.py) and stores ``encode(plan)``; the driver reads the
bytes back into the same types with ``read_plan``, which checks every field's type and refuses a
plan it cannot read (``FormatError``, exit 3). A plan is pure data (docs/design.md §4 rule 8): read
with ``orjson``, never executed or unpickled. No I/O here: the core builds plans too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from sparkrecover.errors import FormatError
from sparkrecover.kinds import Verdict
from sparkrecover.rundir import formats


@dataclass
class Committed:
    """What a committed stage left, as the driver reads it back (a skipped checkpoint) or
    undoes it (an implicit append that runs again)."""

    attempt: int
    paths: list[str]  # the outputs as Spark names them
    format: str | None = None
    schema: str | None = None  # Spark's JSON of the written schema
    table: dict[str, Any] | None = None  # how a table write registers its table again (driver/tables.py)
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
    shape: str | None = None  # digest of the write's shape when they committed (driver/partitions.py)
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
    """An inferred schema the next attempt may reuse (core/schema_reuse.py, driver/schema_reads.py)."""

    key: str
    format: str
    paths: list[str]
    call_site: str | None
    attempt: int
    schema: dict[str, Any]  # Spark's JSON of the StructType
    input_digest: str
    input_count: int
    reason: str

    def summary(self) -> dict[str, Any]:
        """As ``resume --dry-run --json`` shows it (the schema itself stays in the plan file)."""
        return {key: getattr(self, key) for key in ("key", "format", "paths", "call_site", "attempt", "reason")}

    def describe(self) -> str:
        """One line for people: ``reuse the schema of json /data/raw (inputs unchanged)``."""
        return f"reuse the schema of {self.format} {' '.join(self.paths)} ({self.reason})"


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
    (core/shuffles.py, sparkrecover/jvm/KeepingShuffleManager.java)."""

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
    """The plan in ``document`` (a plan file's JSON), checked field by field."""
    fields = _Fields(document, where)
    return Plan(
        run=fields.text("run"),
        attempt=fields.integer("attempt", 0),
        stages=[_entry(item, f"{where}: stages[{i}]") for i, item in enumerate(fields.items("stages"))],
        schemas=[_schema(item, f"{where}: schemas[{i}]") for i, item in enumerate(fields.items("schemas"))],
        shuffles=[_shuffle(item, f"{where}: shuffles[{i}]") for i, item in enumerate(fields.items("shuffles"))],
    )


def _entry(document: Any, where: str) -> PlanEntry:
    fields = _Fields(document, where)
    verdict = fields.text("decision")
    if verdict not in {str(v) for v in Verdict}:
        raise FormatError(f"{where}: unknown decision {verdict!r}")
    committed = fields.optional_object("committed")
    partitions = fields.optional_object("partitions")
    tasks = fields.optional_object("tasks")
    shuffle_maps = fields.optional_object("shuffle_maps")
    return PlanEntry(
        stage=fields.text("stage"),
        decision=Verdict(verdict),
        reason=fields.text("reason"),
        kind=fields.text("kind", "stage"),
        upstream=fields.texts("upstream"),
        committed=_committed(committed, f"{where}.committed") if committed is not None else None,
        restore=fields.objects("restore"),
        fingerprint=fields.optional_object("fingerprint"),
        partitions=_partitions(partitions, f"{where}.partitions") if partitions is not None else None,
        tasks=_tasks(tasks, f"{where}.tasks") if tasks is not None else None,
        shuffle_maps=_partitions(shuffle_maps, f"{where}.shuffle_maps") if shuffle_maps is not None else None,
    )


def _committed(document: dict[str, Any], where: str) -> Committed:
    fields = _Fields(document, where)
    manifest = document.get("manifest")
    if manifest is not None and not (isinstance(manifest, list) and all(isinstance(m, dict) for m in manifest)):
        raise FormatError(f"{where}: manifest must be a list of objects")
    return Committed(
        attempt=fields.integer("attempt"),
        paths=fields.texts("paths"),
        format=fields.optional_text("format"),
        schema=fields.optional_text("schema"),
        table=fields.optional_object("table"),
        manifest=manifest,
        manifest_ref=fields.optional_text("manifest_ref"),
        manifest_sha256=fields.optional_text("manifest_sha256"),
        superseded_by=fields.optional_text("superseded_by"),
    )


def _tasks(document: dict[str, Any], where: str) -> KeptTasks:
    fields = _Fields(document, where)
    return KeptTasks(
        kept=fields.integers("kept"),
        partitions=fields.integer("partitions"),
        shape=fields.optional_text("shape"),
        empty=fields.integers("empty"),
    )


def _partitions(document: dict[str, Any], where: str) -> PartitionCount:
    fields = _Fields(document, where)
    return PartitionCount(kept=fields.integer("kept"), total=fields.integer("total"))


def _shuffle(document: Any, where: str) -> KeptShuffle:
    fields = _Fields(document, where)
    maps = []
    for i, item in enumerate(fields.items("maps")):
        entry = _Fields(item, f"{where}.maps[{i}]")
        maps.append(
            KeptMap(
                map=entry.integer("map"),
                path=entry.text("path"),
                data_bytes=entry.integer("data_bytes"),
                index_bytes=entry.integer("index_bytes"),
                records=entry.integer("records"),
                row_bytes=entry.integer("row_bytes"),
            )
        )
    return KeptShuffle(shuffle=fields.text("shuffle"), stage=fields.optional_text("stage"), maps=maps)


def _schema(document: Any, where: str) -> SchemaEntry:
    fields = _Fields(document, where)
    schema = fields.optional_object("schema")
    if schema is None:
        raise FormatError(f"{where}: schema must be an object")
    return SchemaEntry(
        key=fields.text("key"),
        format=fields.text("format"),
        paths=fields.texts("paths"),
        call_site=fields.optional_text("call_site"),
        attempt=fields.integer("attempt"),
        schema=schema,
        input_digest=fields.text("input_digest"),
        input_count=fields.integer("input_count", 0),
        reason=fields.text("reason", ""),
    )


_MISSING = object()


class _Fields:
    """Typed reads of one JSON object's fields; a wrong type is a ``FormatError`` naming the field."""

    def __init__(self, document: Any, where: str):
        if not isinstance(document, dict):
            raise FormatError(f"{where}: expected a JSON object")
        self.document, self.where = document, where

    def _get(self, key: str, default: Any) -> Any:
        value = self.document.get(key, default)
        if value is _MISSING:
            raise FormatError(f"{self.where}: {key} is missing")
        return value

    def _wrong(self, key: str, expected: str) -> FormatError:
        return FormatError(f"{self.where}: {key} must be {expected}, not {self.document.get(key)!r:.80}")

    def text(self, key: str, default: Any = _MISSING) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self.document.get(key)
        if value is not None and not isinstance(value, str):
            raise self._wrong(key, "a string or null")
        return value

    def integer(self, key: str, default: Any = _MISSING) -> int:
        value = self._get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._wrong(key, "an integer")
        return value

    def optional_object(self, key: str) -> dict[str, Any] | None:
        value = self.document.get(key)
        if value is not None and not isinstance(value, dict):
            raise self._wrong(key, "an object or null")
        return value

    def items(self, key: str) -> list[Any]:
        value = self.document.get(key) or []
        if not isinstance(value, list):
            raise self._wrong(key, "a list")
        return value

    def texts(self, key: str) -> list[str]:
        value = self.items(key)
        if not all(isinstance(item, str) for item in value):
            raise self._wrong(key, "a list of strings")
        return list(value)

    def integers(self, key: str) -> list[int]:
        value = self.items(key)
        if not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            raise self._wrong(key, "a list of integers")
        return list(value)

    def objects(self, key: str) -> list[dict[str, Any]]:
        value = self.items(key)
        if not all(isinstance(item, dict) for item in value):
            raise self._wrong(key, "a list of objects")
        return list(value)
