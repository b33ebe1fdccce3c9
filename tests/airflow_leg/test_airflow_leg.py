"""The Airflow leg (scripts/test_airflow.sh, in .venv-airflow: a real Airflow and its Spark
provider, never the suite's environment). The DAG is docs/launchers.md's, with what a new user
changes: the connection (a local master), the root, the script and its arguments. Airflow runs it
with ``airflow tasks test`` on DAG runs made with ``airflow dags trigger``:

1. the first try's driver is killed in its write (7 of 16 partitions committed);
2. the same task instance again (a retry) resumes: the append before the write is not repeated;
3. once more, it runs nothing;
4. another DAG run is another run, computed whole;
5. the first task instance tried with the page's ``recompute`` param set computes its run again,
   as the run's next generation.

``airflow tasks test`` exits 0 whatever the task did, so each try's state is read from its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.journal import read_journal

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APP = os.path.join(REPO, "tests", "apps", "one_write.py")
PARTS = 16
SECTION = "## Airflow: sparkrecover.airflow"


def page_dag() -> str:
    with open(os.path.join(REPO, "docs", "launchers.md"), encoding="utf-8") as handle:
        page = handle.read()
    section = page[page.index(SECTION) :]
    return re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)


def changed(text: str, old: str, new: str) -> str:
    assert old in text, f"the page's DAG no longer has {old}"
    return text.replace(old, new)


def as_a_user_changes_it(dag: str, root: str, out: str, markers: str) -> str:
    dag = changed(dag, '"spark_yarn"', '"spark_local"')
    dag = changed(dag, '"s3://etl/sparkrecover"', repr(root))
    dag = changed(dag, '"/jobs/etl.py"', repr(APP))
    arguments = [out, markers, str(PARTS), "append-then-overwrite"]
    return re.sub(r"script_args=\[[^\]]*\]", f"script_args={arguments!r}", dag, count=1)


def commits(run_dir: str, attempt: int) -> int:
    """Partitions of the overwrite that ``attempt`` committed so far."""
    try:
        state = RunState.from_events("run", read_journal(run_dir))
    except Exception:  # not there yet, or a segment being written: look again
        return 0
    return sum(
        1
        for found in state.stages.values()
        if "overwrite" in found.name
        for by, _ in found.committed_tasks.values()
        if by == attempt
    )


def events(run_dir: str) -> list[dict]:
    return list(read_journal(run_dir))


def appended_files(out: str) -> int:
    return len([name for name in os.listdir(out + "-log") if name.startswith("part-")])


class Airflow:
    def __init__(self, tmp_path):
        self.folder = str(tmp_path)
        home = tmp_path / "airflow"
        (home / "dags").mkdir(parents=True)
        self.dags = str(home / "dags")
        venv_bin = os.path.dirname(sys.executable)
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": self.dags,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "ONE_WRITE_SLEEP": "1.0",
        }
        self.tries = 0

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["airflow", *args], env=self.env, cwd=self.folder, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"airflow {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    def start_try(self, dag_run: str, *given: str) -> tuple[subprocess.Popen, str]:
        """``airflow tasks test`` of the task in ``dag_run``, in a process group of its own."""
        self.tries += 1
        log = os.path.join(self.folder, f"try-{self.tries}.log")
        with open(log, "wb") as handle:
            process = subprocess.Popen(
                ["airflow", "tasks", "test", "nightly_etl", "etl", dag_run, *given],
                env=self.env,
                cwd=self.folder,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return process, log

    def run_try(self, dag_run: str, *given: str) -> str:
        process, log = self.start_try(dag_run, *given)
        assert process.wait(timeout=900) == 0
        with open(log, encoding="utf-8", errors="replace") as handle:
            return handle.read()


def until(process: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the try ended (exit {process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


def kill_try(process: subprocess.Popen, run_dir: str) -> None:
    """The worker dies: its process group, and any process of this run that left it (the driver
    names the run's folder on its command line)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        if run_dir.encode() in command and int(pid) != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def final_state(log: str) -> str:
    found = re.findall(r"new_state=(\w+)", log)
    assert found, log[-3000:]
    return found[-1]


def test_the_pages_dag_retried_resumes_then_runs_nothing_and_a_new_dag_run_computes_again(tmp_path):
    root, out, markers = str(tmp_path / "runs"), str(tmp_path / "out"), str(tmp_path / "markers")
    airflow = Airflow(tmp_path)
    with open(os.path.join(airflow.dags, "nightly_etl.py"), "w", encoding="utf-8") as handle:
        handle.write(as_a_user_changes_it(page_dag(), root, out, markers))
    airflow.run("db", "migrate")
    airflow.run("dags", "reserialize")
    airflow.run("dags", "trigger", "nightly_etl", "--run-id", "first")
    run_dir = os.path.join(root, "nightly_etl.first.etl")

    first, first_log = airflow.start_try("first")
    until(first, lambda: commits(run_dir, 1) >= 7, "7 of 16 partitions committed")
    kill_try(first, run_dir)
    assert commits(run_dir, 1) < PARTS
    with open(first_log, encoding="utf-8", errors="replace") as handle:
        said = handle.read()
    assert "sparkrecover: run nightly_etl.first.etl under " + root in said
    assert "Spark-Submit cmd: spark-submit --master local[2]" in said

    computed_before = len(os.listdir(markers))
    retry = airflow.run_try("first")
    assert final_state(retry) == "success", retry[-3000:]
    assert "this driver resumes it as attempt 2" in retry, retry[-3000:]
    records = events(run_dir)
    assert [(e["attempt"], e["started_by"]) for e in records if e["type"] == "attempt.started"] == [
        (1, "launcher"),
        (2, "launcher"),
    ]
    assert [e["stage"].split()[1] for e in records if e["type"] == "stage.skipped"] == ["append"]
    assert appended_files(out) == 2  # the append's two partitions, once
    kept = len(next(e for e in records if e["type"] == "write.started" and e["attempt"] == 2)["kept"])
    assert kept >= 7
    assert len(os.listdir(markers)) - computed_before == PARTS - kept  # only what was missing
    assert sorted(n for n in os.listdir(out) if n.startswith("part-"))[-1].startswith(f"part-{PARTS - 1:05d}")

    computed = len(os.listdir(markers))
    third = airflow.run_try("first")
    assert final_state(third) == "success", third[-3000:]
    assert "run nightly_etl.first.etl already completed successfully: this driver runs nothing" in third
    assert len(os.listdir(markers)) == computed
    assert max(e["attempt"] for e in events(run_dir)) == 2

    airflow.run("dags", "trigger", "nightly_etl", "--run-id", "second")
    other = airflow.run_try("second")
    assert final_state(other) == "success", other[-3000:]
    assert "run nightly_etl.second.etl: this driver starts it, as attempt 1" in other, other[-3000:]
    assert len(os.listdir(markers)) == computed + PARTS  # a new DAG run computes everything
    assert appended_files(out) == 4  # and appends once more: it is another night's data
    assert sorted(os.listdir(root)) == ["nightly_etl.first.etl", "nightly_etl.second.etl"]

    again = airflow.run_try("first", "--task-params", json.dumps({"recompute": True}))
    assert final_state(again) == "success", again[-3000:]
    assert "recompute=True: this try computes it again as run nightly_etl.first.etl.r2" in again, again[-3000:]
    assert "run nightly_etl.first.etl.r2: this driver starts it, as attempt 1" in again
    assert len(os.listdir(markers)) == computed + 2 * PARTS
    assert max(e["attempt"] for e in events(run_dir)) == 2  # the first generation is left as it was
