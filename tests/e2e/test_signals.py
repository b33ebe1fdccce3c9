"""A driver stopped by SIGINT or SIGTERM keeps what a SIGKILL at the same point keeps, end to end:
real spark-submit, real signals, a job with a map stage and a write after its shuffle
(tests/apps/shuffle_write.py marks each map and write partition it computes).

At a signal, a SIGKILL would keep exactly what the journal holds: the map outputs and write
partitions journaled by then (tests/e2e/test_shuffle_keep.py, tests/e2e/test_task_resume.py). So
each signal is sent once the journal holds some of them, and the resume must keep at least those
and compute only the rest. Two runs, each stopped twice (in its map stage, then its resume in its
write), cover SIGINT and SIGTERM in both places, sent the ways drivers are stopped: Ctrl-C (the
terminal's whole process group), SIGTERM to ``sparkrecover submit`` (which forwards it to
spark-submit), to the driver's JVM alone (a Kubernetes eviction, an orchestrator's timeout), and
SIGINT to its Python process alone. Outputs are compared row for row with one plain spark-submit.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from sparkrecover.journal import read_journal
from tests.e2e.support import FLUSH_OFTEN, SHUFFLE_WRITE, SHUFFLING, computed
from tests.helpers import dry_run, sparkrecover_command

pytestmark = pytest.mark.e2e
MAPS, WRITES = 12, 12
SLOW = {"SHUFFLE_MAP_SLEEP": "0.5", "SHUFFLE_WRITE_SLEEP": "0.8"}  # time to signal half-way


def app_args(folder) -> list[str]:
    return [SHUFFLE_WRITE, str(folder / "out"), str(folder / "markers"), "agg", str(MAPS), str(WRITES)]


@pytest.fixture
def plain(plain_runs):
    """One uninterrupted plain spark-submit of the job, going on beside the test."""
    return plain_runs.start(SHUFFLE_WRITE, "{folder}/out", "{folder}/markers", "agg", str(MAPS), str(WRITES))


def rows(spark, out: str) -> collections.Counter:
    return collections.Counter(tuple(row) for row in spark.read.parquet(out).select("g", "s", "x").collect())


class Attempt:
    """One ``submit`` or ``resume`` of the run in ``folder``, in its own process group, stopped by
    ``stop`` once ``reached()``; then its exit code and stderr."""

    def __init__(self, folder, *command: str) -> None:
        self.folder, self.run_dir = folder, str(folder / "root" / "night")
        self.attempt = 1 + max((e["attempt"] for e in self.events()), default=0)
        self.since = time.time_ns()
        self.err = folder / f"attempt-{self.attempt}.err"
        with open(self.err, "wb") as err:
            self.process = subprocess.Popen(
                sparkrecover_command(*command, "--root", str(folder / "root"), *self.tail(command)),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                env={**os.environ, **SLOW},
            )

    def tail(self, command: tuple[str, ...]) -> list[str]:
        if command[0] == "submit":
            return ["--run-id", "night", *FLUSH_OFTEN, "--", *SHUFFLING, *app_args(self.folder)]
        return []

    def events(self, kind: str | None = None) -> list[dict]:
        if not os.path.isdir(os.path.join(self.folder, "root", "night")):
            return []
        return [e for e in read_journal(self.run_dir) if kind is None or e["type"] == kind]

    def mine(self, kind: str) -> list[dict]:
        return [e for e in self.events(kind) if e["attempt"] == self.attempt]

    def maps_journaled(self) -> int:
        return sum(len(e["maps"]) for e in self.mine("shuffle.committed"))

    def writes_journaled(self) -> int:
        return len(self.mine("task.committed"))

    def stop(self, reached: Callable[[], bool], send: Callable[[Attempt], None]) -> tuple[int, int]:
        """Send the signal once ``reached()``: (what the journal held then, the exit code)."""
        deadline = time.monotonic() + 300
        while not reached():
            assert self.process.poll() is None, f"attempt {self.attempt} ended before the signal"
            assert time.monotonic() < deadline, "the point to signal at was not reached in time"
            time.sleep(0.05)
        held = (self.maps_journaled(), self.writes_journaled())
        send(self)
        return held, self.wait()

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=300)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)

    def computed(self, kind: str) -> list[int]:
        return computed(str(self.folder / "markers"), kind, self.since)

    def summary(self) -> list[str]:
        return self.err.read_text(errors="replace").splitlines()

    # Where the signal goes: the ways drivers are stopped.
    def ctrl_c(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)  # the terminal's whole foreground group

    def to_sparkrecover(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def to_jvm(self, signum: int) -> None:
        os.kill(_child(self.process.pid), signum)  # spark-submit: the driver's JVM

    def to_python(self, signum: int) -> None:
        (started,) = self.mine("driver.started")
        os.kill(started["pid"], signum)  # the driver's Python process, the JVM's child


def _child(pid: int) -> int:
    """The one child process of ``pid`` (``sparkrecover``'s spark-submit)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    (child,) = found
    return child


def stopped_as(attempt: Attempt, code: int, signum: int) -> None:
    """The attempt ended with 128 + N, said so in the journal, and journaled no stage as failed."""
    (ended,) = attempt.mine("driver.ended")
    assert (ended["exit_code"], ended["signal"]) == (code, signum), ended
    (cli,) = attempt.mine("attempt.ended")
    assert (cli["exit_code"], cli["signal"]) == (code, code - 128)
    assert attempt.mine("stage.failed") == []
    lines = attempt.summary()
    assert f"run night: interrupted (exit {code}), attempt {attempt.attempt}" in lines
    assert "stages: 0 skipped, 0 run, 1 cut off (of 1)" in lines  # not "1 run": it did not finish


def kept_maps(folder) -> int:
    (shuffle,) = dry_run(str(folder / "root"), "night")["shuffles"]
    return shuffle["kept"]


def kept_writes(folder) -> int:
    (stage,) = dry_run(str(folder / "root"), "night")["stages"]
    assert stage["decision"] == "continue", stage
    assert stage["partitions"]["total"] == WRITES
    return stage["partitions"]["kept"]


def test_ctrl_c_in_the_map_stage_and_sigterm_to_the_jvm_in_the_write(tmp_path, plain, spark):
    first = Attempt(tmp_path, "submit")
    (maps, _), code = first.stop(lambda: first.maps_journaled() >= 4, Attempt.ctrl_c)
    assert code == 130, first.err.read_text(errors="replace")[-3000:]
    stopped_as(first, 130, signal.SIGINT)
    kept = kept_maps(tmp_path)
    assert maps <= kept < MAPS  # what a SIGKILL keeps: the journaled map outputs

    second = Attempt(tmp_path, "resume", "night")
    (_, writes), code = second.stop(lambda: second.writes_journaled() >= 3, lambda run: run.to_jvm(signal.SIGTERM))
    assert code == 143, second.err.read_text(errors="replace")[-3000:]
    stopped_as(second, 143, signal.SIGTERM)
    assert len(second.computed("map")) == MAPS - kept  # the kept map outputs were reused
    continued = kept_writes(tmp_path)
    assert writes <= continued < WRITES

    last = Attempt(tmp_path, "resume", "night")
    assert last.wait() == 0, last.err.read_text()[-3000:]
    assert last.computed("map") == []  # every map output kept
    assert len(last.computed("write")) == WRITES - continued
    assert rows(spark, str(tmp_path / "out")) == rows(spark, plain.path("out"))


def test_sigterm_to_submit_in_the_map_stage_and_sigint_to_the_python_driver_in_the_write(tmp_path, plain, spark):
    first = Attempt(tmp_path, "submit")
    (maps, _), code = first.stop(lambda: first.maps_journaled() >= 4, lambda run: run.to_sparkrecover(signal.SIGTERM))
    # submit forwarded the signal and exits as its driver did
    assert code == 143, first.err.read_text(errors="replace")[-3000:]
    stopped_as(first, 143, signal.SIGTERM)
    kept = kept_maps(tmp_path)
    assert maps <= kept < MAPS

    second = Attempt(tmp_path, "resume", "night")
    (_, writes), code = second.stop(lambda: second.writes_journaled() >= 3, lambda run: run.to_python(signal.SIGINT))
    assert code == 130, second.err.read_text(errors="replace")[-3000:]
    stopped_as(second, 130, signal.SIGINT)
    assert len(second.computed("map")) == MAPS - kept
    continued = kept_writes(tmp_path)
    assert writes <= continued < WRITES

    last = Attempt(tmp_path, "resume", "night")
    assert last.wait() == 0, last.err.read_text()[-3000:]
    assert last.computed("map") == []
    assert len(last.computed("write")) == WRITES - continued
    assert rows(spark, str(tmp_path / "out")) == rows(spark, plain.path("out"))
