"""Synthetic journals for tests, written by real JournalWriters (no Spark).

``SyntheticRun`` and its runs run on a fake clock for inspect/replay/follow, so every timestamp, duration
and line of output is the same on every machine; ``Run`` journals stages with real outputs for the planner
and the commands; the segment helpers write raw lines for the reader."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import orjson

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.journal import JournalWriter, read_journal
from sparkrecover.planning.storage_evidence import StorageEvidence
from sparkrecover.rundir import manifests, runs


class Clock:
    def __init__(self, start: datetime = datetime(2026, 11, 22, 3, 0, 0, tzinfo=timezone.utc)):
        self.now = start

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def stamp(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.now.microsecond // 1000:03d}Z"


class ClockedWriter(JournalWriter):
    """A real JournalWriter whose timestamps come from a test clock that moves on each event."""

    def __init__(self, *args, clock: Clock, step: float = 0.5, **kwargs):
        self.clock, self.step = clock, step
        super().__init__(*args, flush_interval=0, **kwargs)

    def _timestamp(self) -> str:
        self.clock.tick(self.step)
        return self.clock.stamp()


class SyntheticRun:
    """A run as sparkrecover submit/resume would journal it, attempt by attempt."""

    def __init__(self, root: str, run_id: str = "nightly", clock: Clock | None = None):
        self.root, self.run_id = str(root), run_id
        self.dir = os.path.join(self.root, run_id)
        self.ref = runs.Run(run_id, self.dir)  # the run as the package passes it
        self.data = os.path.join(os.path.dirname(self.root), "data")
        self.clock = clock or Clock()
        self.number = 0
        self.cli = self.driver = None
        self._job = 0
        self._spark_stage = 0

    def outputs(self, stage: str) -> str:
        return os.path.join(self.data, stage)

    def attempt(self, plan: dict[str, str] | None = None) -> SyntheticRun:
        self.number += 1
        self.cli = ClockedWriter(self.ref, self.number, "cli", clock=self.clock)
        self.driver = ClockedWriter(self.ref, self.number, "driver", clock=self.clock)
        if self.number == 1:
            self.cli.emit(
                "run.started",
                app="/jobs/etl.py",
                app_args=["--day", "2026-11-21"],
                spark_submit_args=["--master", "local[2]"],
                spark_submit="/opt/spark/bin/spark-submit",
            )
        self.cli.emit("attempt.started", pid=4242, command=["spark-submit", "..."])
        if plan is not None:
            self.cli.emit(
                "plan.created",
                plan=f"plans/{self.number:04d}.json",
                stages=[{"stage": s, "decision": d, "reason": "-"} for s, d in plan.items()],
            )
        self.driver.emit(
            "driver.started",
            app_id=f"local-170000000{self.number}",
            master="local[2]",
            deploy_mode="client",
            spark_version="3.5.8",
            pid=5000 + self.number,
        )
        return self

    def started(self, stage: str, upstream: tuple = ()) -> SyntheticRun:
        self.driver.emit(
            "stage.started",
            stage=stage,
            kind="checkpoint",
            outputs=[self.outputs(stage)],
            upstream=list(upstream),
            fingerprint={"version": None},
        )
        return self

    def spark_work(
        self, stage: str, tasks: int = 2, rows: int = 0, failed_tasks: int = 0, failure: str | None = None
    ) -> SyntheticRun:
        self._job += 1
        self._spark_stage += 1
        self.driver.emit("spark.job.started", stage=stage, job=self._job)
        self.driver.emit(
            "spark.stage.completed",
            stage=stage,
            spark_stage=self._spark_stage,
            spark_attempt=0,
            name="save",
            tasks=tasks,
            failed_tasks=failed_tasks,
            failure=failure,
            metrics={"output_records": rows},
        )
        self.driver.emit(
            "spark.job.ended",
            stage=stage,
            job=self._job,
            succeeded=failure is None,
            **({"failure": failure} if failure else {}),
        )
        return self

    def committed(
        self, stage: str, upstream: tuple = (), duration: float = 2.0, files: dict[str, bytes] | None = None
    ) -> SyntheticRun:
        folder = self.outputs(stage)
        os.makedirs(folder, exist_ok=True)
        for name, data in (files or {"part-00000.parquet": b"x" * 2048, "part-00001.parquet": b"y" * 1024}).items():
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(data)
        open(os.path.join(folder, "_SUCCESS"), "wb").close()
        self.driver.emit(
            "stage.committed",
            stage=stage,
            manifest=[manifests.build_output(folder)],
            manifest_ref=None,
            manifest_sha256=None,
            format="parquet",
            duration_s=duration,
            spark_jobs=[self._job],
            upstream=list(upstream),
        )
        return self

    def done(self, stage: str, upstream: tuple = (), rows: int = 1000) -> SyntheticRun:
        return self.started(stage, upstream).spark_work(stage, rows=rows).committed(stage, upstream)

    def skipped(self, stage: str, reason: str) -> SyntheticRun:
        self.driver.emit("stage.skipped", stage=stage, reason=reason)
        return self

    def invalidated(self, stage: str, reason: str) -> SyntheticRun:
        self.driver.emit("stage.invalidated", stage=stage, reason=reason)
        return self

    def failed(self, stage: str, error: str) -> SyntheticRun:
        self.driver.emit("stage.failed", stage=stage, error=error, error_type="Py4JJavaError")
        return self

    def end(self, exit_code: int = 0, signal: int | None = None, error: str | None = None) -> SyntheticRun:
        self.driver.emit("driver.ended", exit_code=exit_code, error=error)
        self.driver.close()
        self.cli.emit("attempt.ended", exit_code=exit_code, signal=signal)
        self.cli.close()
        return self

    def crash(self) -> SyntheticRun:
        """The whole process tree killed: nothing more is written, nobody releases anything."""
        self.driver.close()
        self.cli.close()
        return self


def clean_run(root) -> SyntheticRun:
    run = SyntheticRun(root).attempt()
    return run.done("orders").done("clean", ("orders",), rows=800).done("daily", ("clean",), rows=30).end(0)


def crashed_run(root) -> SyntheticRun:
    run = SyntheticRun(root).attempt()
    run.done("orders").done("clean", ("orders",), rows=800)
    return run.started("daily", ("clean",)).spark_work("daily", tasks=4, failed_tasks=1).crash()


def resumed_run(root) -> SyntheticRun:
    run = crashed_run(root)
    run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"})
    run.skipped("orders", "committed in attempt 1, output verified")
    run.skipped("clean", "committed in attempt 1, output verified")
    return run.done("daily", ("clean",), rows=30).end(0)


def invalidated_run(root) -> SyntheticRun:
    run = SyntheticRun(root).attempt()
    run.done("orders").done("clean", ("orders",)).started("daily", ("clean",))
    run.failed("daily", "Py4JJavaError: An error occurred while calling o123.save.\n\tat line 2").end(1, error="boom")
    run.attempt(plan={"orders": "skip", "clean": "skip", "daily": "run"})
    run.skipped("orders", "committed in attempt 1, output verified")
    run.invalidated("clean", "fingerprint changed: version None -> 2")
    return run.done("clean", ("orders",), rows=900).done("daily", ("clean",), rows=31).end(0)


# Ten bytes with Parquet's magic at both ends, so footer checks pass on untouched files.
PARQUET_LIKE = b"PAR1xxPAR1"


def make_output(path, files=None, success=True) -> str:
    """A folder like Spark writes: part files and, unless told otherwise, _SUCCESS."""
    os.makedirs(path, exist_ok=True)
    for name, data in (files or {"part-00000.parquet": PARQUET_LIKE}).items():
        with open(os.path.join(path, name), "wb") as handle:
            handle.write(data)
    if success:
        open(os.path.join(path, "_SUCCESS"), "wb").close()
    return str(path)


class Run:
    """A run directory with a journal written by a real JournalWriter, one attempt at a time."""

    def __init__(self, root, run_id="r1"):
        self.run_id = run_id
        self.dir = os.path.join(str(root), run_id)
        self.ref = runs.Run(run_id, self.dir)  # the run as the package passes it
        self.outputs: dict[str, str] = {}
        self.attempt = 0
        self.cli = self.driver = None

    def start_attempt(self, app="app.py"):
        self.attempt += 1
        self.cli = JournalWriter(self.ref, self.attempt, "cli", flush_interval=0)
        self.driver = JournalWriter(self.ref, self.attempt, "driver", flush_interval=0)
        if self.attempt == 1:
            self.cli.emit("run.started", app=app, app_args=[], spark_submit_args=["--master", "local[2]"])
        self.cli.emit("attempt.started", pid=1)
        return self

    def started(self, stage, upstream=(), output=True):
        if output:
            self.outputs[stage] = os.path.join(os.path.dirname(self.dir), "data", stage)
        outputs = [self.outputs[stage]] if stage in self.outputs else []
        self.driver.emit(
            "stage.started",
            stage=stage,
            kind="stage",
            outputs=outputs,
            upstream=list(upstream),
            fingerprint={"version": None},
        )
        return self

    def committed(self, stage, upstream=(), files=None, checksums=False):
        manifest = []
        if stage in self.outputs:
            make_output(self.outputs[stage], files)
            manifest = [manifests.build_output(self.outputs[stage], checksums=checksums)]
        manifest, ref, digest = manifests.externalize(stage, manifest, self.dir)
        self.driver.emit(
            "stage.committed",
            stage=stage,
            manifest=manifest,
            manifest_ref=ref,
            manifest_sha256=digest,
            upstream=list(upstream),
            duration_s=1.0,
        )
        return self

    def done(self, stage, upstream=(), files=None):
        return self.started(stage, upstream).committed(stage, upstream, files)

    def failed(self, stage, error):
        self.driver.emit("stage.failed", stage=stage, error=error, error_type="RuntimeError")
        return self

    def end(self, exit_code=1, signal=None):
        self.driver.emit("driver.ended", exit_code=exit_code)
        self.cli.emit("attempt.ended", exit_code=exit_code, signal=signal)
        self.driver.close()
        self.cli.close()
        return self

    def state(self) -> RunState:
        return RunState.from_events(self.run_id, read_journal(self.dir))

    def plan(self, **options) -> dict[str, tuple[str, str]]:
        decisions = planner.make_plan(self.state(), StorageEvidence(self.dir), **options)
        return {d.stage: (d.decision, d.reason) for d in decisions}


def line_of(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"


def segment_path(run_dir, attempt=1, writer="driver", index=0) -> str:
    return os.path.join(str(run_dir), "journal", f"{attempt:04d}-{writer}-{index:06d}.jsonl")


def envelope(seq, type_="stage.started", ts="2026-01-01T00:00:00.000Z", attempt=1, writer="driver", **extra):
    if type_.startswith("stage."):
        extra.setdefault("stage", "clean")  # every stage event names its stage (events.REQUIRED)
    return {"v": 1, "type": type_, "run": "r1", "attempt": attempt, "writer": writer, "seq": seq, "ts": ts, **extra}


def write_segment(run_dir, lines: list[bytes], attempt=1, writer="driver", index=0) -> str:
    path = segment_path(run_dir, attempt, writer, index)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"".join(lines))
    return path
