"""Driver-side state while a script runs under ``sparkrecover submit``.

The bootstrap installs one ``Runtime``; the API asks ``current()`` and, when there is none (plain
``spark-submit``, a notebook, a unit test), runs everything and records nothing.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Optional

from sparkrecover import storage

# The Spark local property that attributes scheduler events to pipeline stages (DESIGN §6).
STAGE_PROPERTY = "sparkrecover.stage"


class Runtime:
    def __init__(self, writer: Any, run_dir: str, plan: Optional[dict[str, Any]] = None):
        self.writer = writer
        self.run_dir = run_dir
        self.decisions: dict[str, dict[str, Any]] = {
            entry["stage"]: entry for entry in (plan or {}).get("stages", [])}
        self.reached: list[str] = []
        # fsspec URL of each known output -> the stage that produces it, for upstream edges.
        self.producers: dict[str, str] = {}
        for name, entry in self.decisions.items():
            for path in (entry.get("committed") or {}).get("paths") or []:
                self.producers[storage.from_spark_path(path)] = name
        self._jobs: dict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()
        self.telemetry: Any = None  # listener_bridge.Telemetry, set by the bootstrap

    def decision(self, name: str) -> Optional[dict[str, Any]]:
        return self.decisions.get(name)

    def reach(self, name: str) -> None:
        if name in self.reached:
            from sparkrecover.errors import UsageError

            raise UsageError(f"stage name {name!r} is used twice in this run; stage names must be unique")
        self.reached.append(name)

    def add_outputs(self, name: str, urls: list[str]) -> None:
        for url in urls:
            self.producers[url] = name

    def upstream_of_files(self, spark_files: list[str], exclude: str) -> list[str]:
        """The stages whose outputs contain any of these files (what a DataFrame reads)."""
        found: list[str] = []
        for spark_file in spark_files:
            url = storage.from_spark_path(spark_file)
            for output, producer in self.producers.items():
                if producer != exclude and producer not in found and (
                        url == output or url.startswith(output.rstrip("/") + "/")):
                    found.append(producer)
        return found

    # Telemetry from the listener thread: never used for decisions (rule 6).
    def sync_telemetry(self) -> None:
        """Journal the Spark events the listener has seen so far (before a commit lists its jobs)."""
        if self.telemetry is not None:
            self.telemetry.sync()

    def note_job(self, stage: Optional[str], job_id: int) -> None:
        if stage is not None:
            with self._lock:
                self._jobs[stage].append(job_id)

    def jobs_of(self, stage: str) -> list[int]:
        with self._lock:
            return list(self._jobs.get(stage, ()))


_current: Optional[Runtime] = None


def current() -> Optional[Runtime]:
    return _current


def install(runtime: Optional[Runtime]) -> None:
    global _current
    _current = runtime
