"""``sparkrecover report`` on recorded journals (no Spark): where the page goes, what it holds,
escaping, damaged and unknown runs, an S3 root, ``--open``, and the hint submit and resume print."""

from __future__ import annotations

import os
import re
import webbrowser

import pytest

from sparkrecover.journal import JournalWriter
from sparkrecover.rundir.runs import Run
from tests.journals import SyntheticRun, invalidated_run, resumed_run, segment_path


def test_the_page_goes_to_run_report_html_here_and_names_the_run(cli, tmp_path):
    resumed_run(tmp_path / "root")
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"))
    assert code == 0, err
    path = tmp_path / "nightly-report.html"  # the test runs in tmp_path
    assert out == "" and err == f"report of run nightly (succeeded) written to {path}\n"
    html = path.read_text()
    assert html.startswith("<!doctype html>") and "<title>Run nightly · succeeded · sparkrecover</title>" in html
    assert re.findall(r'<section class="lane" id="attempt-(\d)"', html) == ["1", "2"]
    assert html.count('class="row stage-row"') == 6
    assert 'data-stage="daily" data-outcome="interrupted"' in html
    assert 'data-stage="orders" data-outcome="skipped"' in html
    assert 'id="saved">4.0s<' in html
    assert "Attempt 2 skipped orders, clean; committed daily, and succeeded." in html
    # Self-contained: nothing is fetched, nothing runs.
    assert not re.search(r"<script|<link|@import|src=|https?://", html)


def test_dash_writes_the_page_to_stdout_and_o_to_a_file(cli, tmp_path):
    invalidated_run(tmp_path / "root")
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    assert code == 0 and err == "" and out.startswith("<!doctype html>") and out.rstrip().endswith("</html>")
    target = tmp_path / "pages" / "night.html"
    target.parent.mkdir()
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "--output", str(target))
    assert code == 0 and out == "" and str(target) in err
    html = target.read_text()
    assert "Next resume" in html and 'id="failure"' in html and "boom" in html
    code, _, err = cli(
        "report", "nightly", "--root", str(tmp_path / "root"), "-o", str(tmp_path / "nowhere" / "x.html")
    )
    assert code == 2 and err.startswith("error: -o ") and "no folder" in err


def test_the_next_resumes_plan_is_on_the_page_of_an_unfinished_run(cli, tmp_path):
    run = SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").started("clean").failed("clean", "ValueError: bad row\nmore").end(1)
    code, out, _ = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    assert code == 0
    plan = re.findall(r'<td class="stage-name">([^<]*)</td><td><span class="decision d-(\w+)">', out)
    assert plan == [("orders", "skip"), ("clean", "run")]
    assert "What &#39;sparkrecover resume nightly&#39; would do now, as attempt 2: 1 skip, 1 run." in out
    assert "<code>sparkrecover resume nightly --root" in out


def test_journal_text_stays_text(cli, tmp_path):
    """A stage name or path with markup in it is shown, never run."""
    evil = '<script>alert("x")</script>'
    run = SyntheticRun(tmp_path / "root").attempt()
    run.driver.emit("stage.started", stage=evil, kind="write", outputs=[f"/data/{evil}"], upstream=[], fingerprint={})
    run.failed(evil, f"boom {evil}").end(1, error=f"Traceback {evil}")
    code, out, _ = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    assert code == 0
    assert "<script" not in out and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in out
    assert out.count("&lt;script&gt;") >= 5  # the lane, the bar's title, the stage table, the plan, the failure


def test_an_unknown_run_is_exit_5_and_one_line(cli, tmp_path):
    code, out, err = cli("report", "nope", "--root", str(tmp_path / "root"))
    assert (code, out) == (5, "") and err.count("\n") == 1 and err.startswith("error: no run 'nope'")
    assert not os.path.exists(tmp_path / "nope-report.html")


def test_open_needs_a_file(cli, tmp_path):
    resumed_run(tmp_path / "root")
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-", "--open")
    assert (code, out) == (2, "") and "--open needs a file" in err


class Recorder:
    def __init__(self):
        self.opened: list[str] = []

    def open(self, url: str) -> bool:
        self.opened.append(url)
        return True


def test_open_hands_the_file_to_the_browser_or_says_there_is_none(cli, tmp_path, monkeypatch):
    resumed_run(tmp_path / "root")
    browser = Recorder()
    monkeypatch.setattr(webbrowser, "get", lambda: browser)
    code, _, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "--open")
    assert code == 0 and browser.opened == [f"file://{tmp_path / 'nightly-report.html'}"]

    def none():
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", none)
    code, _, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "--open")
    assert code == 0 and err.endswith("no web browser found here: open the file yourself\n")


def test_a_damaged_journal_is_reported_around_its_damage_with_exit_3(cli, tmp_path):
    run = resumed_run(tmp_path / "root")
    path = segment_path(run.dir, attempt=2, writer="driver")
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    lines[3] = b'{"v":1,"type":"stage.skipped", garbage'
    with open(path, "wb") as handle:
        handle.write(b"\n".join(lines))
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"))
    assert code == 3 and out == ""
    assert "warning: the journal of run nightly is damaged; the report shows what could be read:" in err
    html = (tmp_path / "nightly-report.html").read_text()
    assert 'id="damage"' in html and "0002-driver-000000.jsonl:4: malformed journal line" in html
    assert "damaged segment " in html and "its readable lines are shown" in html
    # Every other line of the damaged segment is still on the page: the resumed attempt committed daily.
    assert re.findall(r'<section class="lane" id="attempt-(\d)"', html) == ["1", "2"]
    assert 'data-stage="daily" data-outcome="committed"' in html


def test_a_running_run_is_a_snapshot(cli, tmp_path):
    from sparkrecover.rundir import lease as leases

    run = SyntheticRun(tmp_path / "root").attempt()
    run.done("orders").started("clean")
    run.driver.flush()
    run.cli.flush()
    lease = leases.Lease(run.ref).acquire()
    try:
        code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    finally:
        lease.release()
        run.crash()
    assert code == 0, err
    assert '<span class="status s-running" data-status="running">running</span>' in out
    assert "A snapshot of a running run" in out and 'data-stage="clean" data-outcome="running"' in out


def test_a_run_on_s3_is_reported_like_a_local_one(cli, s3, tmp_path):
    run_dir = s3.prefix + "/r9"
    cli_writer = JournalWriter(Run("r9", run_dir), 1, "cli", flush_interval=0)
    driver = JournalWriter(Run("r9", run_dir), 1, "driver", flush_interval=0)
    cli_writer.emit("run.started", app="etl.py")
    cli_writer.emit("attempt.started", pid=1)
    driver.emit("driver.started", app_id="local-1", master="local[2]", deploy_mode="client", spark_version="3.5.8")
    driver.emit("stage.started", stage="orders", kind="checkpoint", outputs=[s3.prefix + "/data/orders"], upstream=[])
    driver.emit("stage.failed", stage="orders", error="OutOfMemoryError: Java heap space", error_type="Py4JJavaError")
    driver.close()
    cli_writer.emit("attempt.ended", exit_code=1)
    cli_writer.close()
    code, out, err = cli("report", "r9", "--root", s3.prefix, "-o", "-")
    assert code == 0, err
    assert 'data-stage="orders" data-outcome="failed"' in out and "OutOfMemoryError: Java heap space" in out
    assert f"<dd>{run_dir}</dd>" in out
    code, out, _ = cli("report", run_dir, "-o", "-")  # the run directory's URL works as well
    assert code == 0 and 'Run <span class="run-id">r9</span>' in out


@pytest.mark.parametrize("code", [0, 1])
def test_resume_and_a_failed_submit_print_the_report_command(cli, tmp_path, code):
    from tests.helpers import fake_executable

    spark_submit = fake_executable(tmp_path / "bin" / "spark-submit", f"exit {code}")
    (tmp_path / "app.py").write_text("print('hi')\n")
    root = str(tmp_path / "root")
    status, _, err = cli("submit", "--root", root, "--run-id", "r1", "--spark-submit", spark_submit, "--", "app.py")
    assert status == code
    hint = f"to see the run as a page: sparkrecover report r1 --root {root}\n"
    assert (hint in err) == (code != 0)  # a first attempt that succeeded needs no page
    if code:
        status, _, err = cli("resume", "r1", "--root", root, "--spark-submit", spark_submit)
        assert status == code and err.endswith(hint)


def test_the_journal_can_be_written_while_the_page_is_made(tmp_path):
    """The report reads a snapshot: a writer still appending does not break it (the segment's torn
    tail is dropped with a warning, as inspect does)."""
    from sparkrecover.cli import report as command
    from sparkrecover.core.views import report_data as pages
    from sparkrecover.journal import read_journal

    run = SyntheticRun(tmp_path / "root").attempt().done("orders")
    run.driver.flush()
    with open(segment_path(run.dir, attempt=1, writer="driver"), "ab") as handle:
        handle.write(b'{"v":1,"type":"stage.sta')  # a write caught half-way
    collected = pages.Collector("nightly")
    collected.feed(read_journal(run.dir))
    html = command.render_html(collected.report(run.dir))
    assert 'data-stage="orders" data-outcome="committed"' in html
    run.crash()


def test_a_journal_of_a_newer_format_is_exit_3_and_no_page(cli, tmp_path):
    from tests.journals import envelope, line_of, write_segment

    run_dir = tmp_path / "root" / "r1"
    write_segment(run_dir, [line_of(envelope(0, "attempt.started", writer="cli"))], writer="cli")
    write_segment(run_dir, [line_of({**envelope(0), "v": 2})])
    code, out, err = cli("report", "r1", "--root", str(tmp_path / "root"))
    assert (code, out) == (3, "") and err.startswith("error: ") and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "r1-report.html")


def test_a_write_that_kept_partitions_is_a_row_of_the_stages_table(cli, tmp_path):
    """A resumed write that committed: its row says what it kept and computed (the stage row's
    partitions then hold kept/computed/total, not the committed count of an unfinished write)."""
    from tests.core.test_report import task_level_run

    task_level_run(tmp_path / "root")
    code, out, err = cli("report", "nightly", "--root", str(tmp_path / "root"), "-o", "-")
    assert code == 0, err
    assert "2 kept, 2 computed of 4 partitions" in out
