"""The report of a real run, killed and resumed, in a real browser: headless Chromium (Debian's
``chromium``, which ``scripts/setup.sh test`` installs) loads the page from disk with no network,
and its rendered DOM holds the lanes, the bars and the partition grid. The screenshot is kept
next to the page in the test's folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import orjson
import pytest

from tests.e2e.support import PARTS, Hold, one_write_command, run_and_kill, task_commits
from tests.helpers import run_cli

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # Any request the page made would go to a closed port and fail: the page must need none.
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]


def chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """Chromium on a fresh profile; in a namespace without network when this user may make one."""
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    if shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0:
        command = ["unshare", "--net", *command]
    result = subprocess.run(command, capture_output=True, timeout=180)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return result


def test_a_killed_and_resumed_run_reads_as_a_page_in_a_real_browser(tmp_path):
    if not os.access(CHROMIUM, os.X_OK):
        why = "no chromium: `bash scripts/setup.sh test` installs Debian's chromium (apt-get as root or with sudo)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must run the report's browser test")
        pytest.skip(why)
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    run_dir = os.path.join(root, "night")
    # orders is committed, then numbers is killed once 6 of its 16 partitions have committed (the
    # next ones held).
    held = Hold(tmp_path).env(6, ONE_WRITE_SLEEP="0")
    command = one_write_command(root, out, markers, "pipeline")
    run_and_kill(command, lambda: task_commits(run_dir, 1, "numbers") >= 6, "6 commits of numbers", env=held)
    resumed = run_cli("resume", "night", "--root", root, env={**os.environ, "ONE_WRITE_SLEEP": "0"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"to see the run as a page: sparkrecover report night --root {root}" in resumed.stderr
    plan = orjson.loads(open(os.path.join(run_dir, "plans", "0002.json"), "rb").read())
    decisions = {entry["stage"]: entry for entry in plan["stages"]}
    assert decisions["orders"]["decision"] == "skip" and decisions["numbers"]["decision"] == "continue"
    kept = decisions["numbers"]["partitions"]["kept"]
    assert kept == 6

    page = tmp_path / "night-report.html"
    made = run_cli("report", "night", "--root", root, "-o", str(page))
    assert made.returncode == 0, made.stderr

    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout.decode()
    assert "<title>Run night · succeeded · sparkrecover</title>" in dom
    lanes = re.findall(r'<section class="lane" id="attempt-(\d)" data-attempt="\d" data-outcome="(\w+)"', dom)
    assert lanes == [("1", "crashed"), ("2", "succeeded")]
    first, second = dom.split('id="attempt-2"')
    first = first.split('id="attempt-1"')[1]
    assert re.findall(r'data-stage="([^"]+)" data-outcome="(\w+)"', first) == [
        ("orders", "committed"),
        ("numbers", "interrupted"),
    ]
    assert re.findall(r'data-stage="([^"]+)" data-outcome="(\w+)"', second.split("</section>")[0]) == [
        ("orders", "skipped"),
        ("numbers", "continued"),
        ("publish", "committed"),
    ]
    assert f"{kept}/{PARTS} partitions kept from earlier attempts" in second
    grid = dom.split('data-kind="write" data-name="numbers"')[1].split("</figure>")[0]
    assert grid.count('class="cell c-kept"') == kept
    assert grid.count('class="cell c-computed"') == PARTS - kept
    assert "the driver died here" in first

    screenshot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1200,2200", page.as_uri())
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    phone = tmp_path / "report-phone.png"
    chromium(tmp_path, f"--screenshot={phone}", "--window-size=390,2600", page.as_uri())
    assert phone.stat().st_size > 10_000
