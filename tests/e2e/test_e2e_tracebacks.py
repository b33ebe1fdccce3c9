"""End to end on real Spark: a failing application looks the same under submit as under plain
spark-submit: the same traceback frames (none of sparkrecover's, no runpy) and the same exit code."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import sparkrecover
from sparkrecover.launch.launcher import find_spark_submit
from tests.e2e.support import APPS, side_by_side
from tests.helpers import SPARK_OPTIONS, run_cli

pytestmark = pytest.mark.e2e
FAILING = os.path.join(APPS, "failing.py")
# sparkrecover's own code, wherever it is installed: a checkout folder named "sparkrecover" (what
# `git clone` makes) holds the application's frames too, and they are not ours.
PACKAGE_DIR = os.path.dirname(os.path.realpath(sparkrecover.__file__))


def traceback_of(output: str) -> list[str]:
    """The Python traceback in spark-submit's output: its header, frames and exception line."""
    lines = output.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("Traceback (most recent call last):") or re.match(r'  File ".*", line \d+$', line)
        ),
        None,
    )
    assert start is not None, output[-3000:]
    kept = []
    for line in lines[start:]:
        kept.append(line)
        if not line.startswith((" ", "Traceback")):
            break  # the exception line ends it
    return [line for line in kept if line.startswith(("Traceback", '  File "')) or not line.startswith(" ")]


def frame_files(traceback: list[str]) -> list[str]:
    return [m.group(1) for line in traceback if (m := re.match(r'  File "(.*)", line \d+', line))]


def ours_or_runpy(path: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(PACKAGE_DIR + os.sep) or os.path.basename(real) == "runpy.py"


def test_frames_are_told_by_where_they_are_not_by_a_folder_name():
    inside = os.path.join(PACKAGE_DIR, "driver", "bootstrap.py")
    a_clone = os.path.join(os.path.dirname(PACKAGE_DIR) + "-clone", "sparkrecover", "tests", "apps", "failing.py")
    frames = frame_files([f'  File "{inside}", line 3, in main', f'  File "{a_clone}", line 9, in <module>'])
    assert [ours_or_runpy(path) for path in frames] == [True, False]


def plain(app: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [find_spark_submit(), *SPARK_OPTIONS, app, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


# "raise" passes on code older than the fix too (leading bootstrap and runpy frames were already
# trimmed); "write" and "chained" catch sparkrecover's frames inside the traceback and inside a
# chained exception's, "syntax" a SyntaxError printed as a traceback.
@pytest.mark.parametrize("mode", ["raise", "write", "chained", "syntax"])
def test_a_failing_application_fails_as_under_plain_spark_submit(tmp_path, mode):
    app, out = FAILING, tmp_path / "out"
    out.mkdir()
    (out / "existing").write_text("a write in mode error fails on this folder\n")
    if mode == "syntax":
        app = str(tmp_path / "broken.py")
        with open(app, "w") as handle:
            handle.write("import sys\n\nif True\n    sys.exit(0)\n")
    bare, ours = side_by_side(
        lambda: plain(app, mode, str(out)),
        lambda: run_cli("submit", "--root", str(tmp_path / "root"), "--", *SPARK_OPTIONS, app, mode, str(out)),
    )
    assert bare.returncode != 0 and ours.returncode == bare.returncode, ours.stderr[-3000:]
    expected = traceback_of(bare.stdout + bare.stderr)
    assert traceback_of(ours.stdout + ours.stderr) == expected
    assert frame_files(expected) and not any(ours_or_runpy(path) for path in frame_files(expected))
