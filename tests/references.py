"""Reference runs: a script under plain spark-submit, without sparkrecover, for the output an
end-to-end test compares its resumed run with.

Each distinct run (script, arguments, seeding of its folder) is started once per test session
(once per pytest-xdist worker: scripts/test.sh sends the tests of one file to one worker) by the
first test that asks for it, in the background, so it goes on beside that test's killed run; every
later test that asks for the same run shares it. How to use it: docs/contributing.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers import SPARK_OPTIONS

FOLDER = "{folder}"  # in an argument: the reference run's own folder (also its working directory)


def plain_env() -> dict[str, str]:
    """The environment of a plain spark-submit: this test process's, with the workers on its Python."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable}


def plain_command(app: str, *args: str) -> list[str]:
    from sparkrecover.launch.spark_submit import find_spark_submit

    return [find_spark_submit(), *SPARK_OPTIONS, app, *args]


class PlainRun:
    """One script under plain spark-submit in a folder of its own, started at once; ``wait()``
    waits for it and asserts it succeeded and that sparkrecover stayed out of it."""

    def __init__(self, folder: Path, command: list[str], timeout: float) -> None:
        self.folder = folder
        self.timeout = timeout
        # Files, not pipes: nobody reads a pipe while the run goes on beside a test.
        self._out, self._err = folder / "spark-submit.out", folder / "spark-submit.err"
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self._process = subprocess.Popen(command, stdout=out, stderr=err, env=plain_env(), cwd=folder)

    def wait(self) -> PlainRun:
        try:
            self._process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        assert self._process.returncode == 0, self.stderr[-3000:]
        assert not (self.folder / ".sparkrecover").exists()
        return self

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    @property
    def stdout(self) -> str:
        return self._out.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self._err.read_text(errors="replace")

    def path(self, *parts: str) -> str:
        """A path inside the run's folder (waits for the run first)."""
        self.wait()
        return os.path.join(self.folder, *parts)

    def text(self, *parts: str) -> str:
        """The text of a file the run wrote, below its folder."""
        with open(self.path(*parts)) as handle:
            return handle.read()


class PlainRuns:
    """The session's reference runs, one per (script, arguments, seed)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._runs: dict[tuple, PlainRun] = {}

    def start(
        self, app: str, *args: str, seed: Callable[[Path], object] | None = None, timeout: float = 600
    ) -> PlainRun:
        """The run of ``app`` with ``args`` (``{folder}`` in one stands for the run's folder),
        started now unless this session already started it. ``seed(folder)``, a module-level
        function, fills the folder first (input data); it is part of what names the run."""
        key = (app, args, seed)
        if key not in self._runs:
            folder = self.base / f"plain-{len(self._runs)}-{os.path.basename(app).removesuffix('.py')}"
            folder.mkdir(parents=True)
            if seed is not None:
                seed(folder)
            command = plain_command(app, *(arg.replace(FOLDER, str(folder)) for arg in args))
            self._runs[key] = PlainRun(folder, command, timeout)
        return self._runs[key]

    def stop_all(self) -> None:
        """End whatever run is still going (a test that failed before waiting for its run): the
        session leaves no JVM behind."""
        for run in self._runs.values():
            run.stop()
