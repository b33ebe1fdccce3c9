"""How the CLI starts: usage errors exit 2 whichever click typer runs on, and ``--help`` imports
none of the heavy modules (DESIGN §9: they are imported only by the commands that need them)."""
from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyspark", "py4j", "fsspec", "s3fs", "rich", "orjson", "sparkrecover.journal",
         "sparkrecover.core.planner", "sparkrecover.driver.api", "sparkrecover.driver.telemetry")


@pytest.mark.parametrize("args", [["resume"], ["resume", "run-1", "--no-such-option"], ["no-such-command"]])
def test_usage_errors_exit_2_with_a_message_not_a_crash(cli, args):
    code, out, err = cli(*args)
    assert code == 2, err
    assert "internal error" not in err and "Error" in err


def test_help_imports_nothing_heavy():
    probe = ("import sys\nfrom sparkrecover import cli\n"
             "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
             f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "submit" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"
