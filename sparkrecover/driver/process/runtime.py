"""Driver-side state while a script runs under ``sparkrecover submit``.

The bootstrap installs one ``Runtime``; the API asks ``current()`` and, when there is none (plain
``spark-submit``, a notebook, a unit test), runs everything and records nothing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from sparkrecover.kinds import Verdict
from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import ActionEntry, Plan, PlanEntry, SchemaEntry

# Longest wait at a stage commit for Spark's listener queues to deliver the stage's last events.
COMMIT_SETTLE_MS = 2000
# The Spark local property that attributes scheduler events to pipeline stages (docs/design.md §6).
STAGE_PROPERTY = "sparkrecover.stage"


class Runtime:
    def __init__(
        self,
        writer: Any,
        run_dir: str,
        plan: Plan | None = None,
        checksums: bool = False,
        checkpoint_root: str | None = None,
    ):
        self.writer = writer
        self.run_dir = run_dir
        self.checksums = checksums  # record content digests of outputs at commit
        self.checkpoint_root = checkpoint_root
        # The token of the lease the CLI holds for this attempt (driver/process/fence.py), and whether a
        # check found it taken over: nothing is committed after that.
        self.lease_token: str | None = None
        self.fenced = False
        # The signal (SIGINT, SIGTERM) that stopped the script, once one did (driver/process/signals.py).
        self.interrupted: int | None = None
        self.decisions: dict[str, PlanEntry] = {entry.stage: entry for entry in plan.stages} if plan else {}
        self.reached: list[str] = []
        # fsspec URL of each known output -> the stage that produces it, for upstream edges.
        self.producers: dict[str, str] = {}
        for name, entry in self.decisions.items():
            for path in entry.committed.paths if entry.committed else []:
                self.producers[storage.from_spark_path(path)] = name
        # Fingerprint digest of every stage this attempt has reached (or the plan recorded).
        self.fingerprints: dict[str, str] = {
            name: digest for name, entry in self.decisions.items() if (digest := entry.fingerprint_digest)
        }
        # Schemas an earlier attempt inferred, by read key, that the plan says may be reused
        # (driver/recording/schema_reads.py checks the input files again before using one).
        self.schemas: dict[str, SchemaEntry] = {entry.key: entry for entry in plan.schemas} if plan else {}
        # Recorded actions by key, as the plan offers them (driver/recall/: replayed when their
        # fingerprint is unchanged), the calls of each action per call site so far, and the
        # recorder of this attempt's results (None: replay off, or no SparkContext yet).
        self.results: dict[str, ActionEntry] = {entry.key: entry for entry in plan.actions} if plan else {}
        self.action_ordinals: dict[tuple[str, str], int] = {}
        self.recorder: Any = None
        self.result_limit = 8 << 20
        self.record_models = True  # model training recorded and replayed (spark.sparkrecover.replay.models)
        self._jobs: dict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()
        # Per thread, like the Spark local property: a write made while a stage runs belongs to
        # that stage, while another thread's write is its own implicit stage (zero-code mode).
        self._scopes = threading.local()
        # Zero-code mode: writes seen so far per (call site, mode, target), for their ordinals.
        self.write_ordinals: dict[tuple[str, str, str], int] = {}
        self.telemetry: Any = None  # driver/telemetry.Telemetry, set by the bootstrap

    @property
    def in_stage(self) -> bool:
        return getattr(self._scopes, "depth", 0) > 0

    def enter_stage(self) -> None:
        self._scopes.depth = getattr(self._scopes, "depth", 0) + 1

    def leave_stage(self) -> None:
        self._scopes.depth = max(0, getattr(self._scopes, "depth", 0) - 1)

    # A declared stage with one output keeps the committed tasks of its write to that output
    # (task-level resume): the stage names the write it expects, the write hook finds it here.
    def expect_write(self, declared: Any | None) -> None:
        self._scopes.declared = declared

    def expected_write(self) -> Any | None:
        return getattr(self._scopes, "declared", None)

    def checkpoint_url(self, name: str) -> str:
        """Default place of a checkpoint: <run dir>/checkpoints/<name>, or with --checkpoint-root
        <checkpoint root>/<run id>/<name> (an fsspec URL; Spark gets it through to_spark_path)."""
        from urllib.parse import quote

        if self.checkpoint_root:
            return storage.join(self.checkpoint_root, self.writer.run.id, quote(name, safe=""))
        return storage.join(self.run_dir, "checkpoints", quote(name, safe=""))

    def decision(self, name: str) -> PlanEntry | None:
        return self.decisions.get(name)

    def reach(self, name: str) -> None:
        if name in self.reached:
            from sparkrecover.errors import UsageError

            raise UsageError(f"stage name {name!r} is used twice in this run; stage names must be unique")
        self.reached.append(name)

    def add_outputs(self, name: str, urls: list[str]) -> None:
        for url in urls:
            self.producers[url] = name

    def split_inputs(self, spark_files: list[str], exclude: str) -> tuple[list[str], list[str]]:
        """(stages whose outputs hold some of these files, the files no stage produced)."""
        upstream: list[str] = []
        external: list[str] = []
        prefixes = [
            (output.rstrip("/") + "/", output, producer)
            for output, producer in self.producers.items()
            if producer != exclude
        ]
        for spark_file in spark_files:
            url = storage.from_spark_path(spark_file)
            producer = next((p for prefix, output, p in prefixes if url == output or url.startswith(prefix)), None)
            if producer is None:
                external.append(url)
            elif producer not in upstream:
                upstream.append(producer)
        return upstream, external

    def upstream_fingerprints(self, upstream: list[str]) -> dict[str, str]:
        return {name: self.fingerprints.get(name, "") for name in upstream}

    def is_lost(self, name: str) -> bool:
        entry = self.decisions.get(name)
        return entry is not None and entry.decision == Verdict.LOST

    def is_superseded(self, name: str) -> bool:
        """Skipped, but a later stage of the run changed its output (a table inserted into,
        truncated, dropped): its files are no longer what its readers read."""
        entry = self.decisions.get(name)
        return entry is not None and entry.superseded

    # Telemetry from the listener thread: never used for decisions (§4 rule 6).
    def sync_telemetry(self) -> None:
        """Journal the Spark events the listener has seen so far (before a commit lists its jobs)."""
        if self.telemetry is not None:
            self.telemetry.sync(settle_ms=COMMIT_SETTLE_MS)

    def note_job(self, stage: str | None, job_id: int) -> None:
        if stage is not None:
            with self._lock:
                self._jobs[stage].append(job_id)

    def jobs_of(self, stage: str) -> list[int]:
        with self._lock:
            return list(self._jobs.get(stage, ()))


_current: Runtime | None = None


def current() -> Runtime | None:
    return _current


def install(runtime: Runtime | None) -> None:
    global _current
    _current = runtime
