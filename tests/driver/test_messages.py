"""The driver's own lines reach spark-submit's stderr, not the application's stdout
(driver/process/messages.py). Spark's PythonRunner merges the Python driver's stderr into its
stdout and copies it to the JVM's stdout; the parent below does exactly that, so the test needs no
JVM. The same on a real spark-submit: tests/e2e/test_e2e_restart.py (the command run again)."""

from __future__ import annotations

import os
import subprocess
import sys

# PythonRunner's part: the child's stderr merged into its stdout, copied to the parent's stdout.
PARENT = """
import subprocess, sys
child = subprocess.run([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
sys.stdout.write(child.stdout.decode())
"""
CHILD = """
import sys
from sparkrecover.driver.process import messages, which_attempt
print("the script's line")
print("the script's warning", file=sys.stderr)
which_attempt.say("run r1: this driver starts it, as attempt 1")
messages.say("sparkrecover: warning: something")
"""


def run_under_parent(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PARENT, CHILD], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    )


def test_under_spark_submit_the_driver_says_its_lines_on_the_jvms_stderr():
    done = run_under_parent(PYSPARK_GATEWAY_PORT="1")
    # The application's stdout is what a plain run prints: its own lines, its stderr merged in.
    assert done.stdout.splitlines() == ["the script's line", "the script's warning"]
    assert done.stderr.splitlines() == [
        "sparkrecover: run r1: this driver starts it, as attempt 1",
        "sparkrecover: warning: something",
    ]


def test_outside_spark_submit_the_lines_go_to_stderr():
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.splitlines() == ["the script's line"]
    assert "sparkrecover: warning: something" in done.stderr.splitlines()
