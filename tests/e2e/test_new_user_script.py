"""A new user's own nightly script (tests/apps/nightly_orders.py: messy CSV orders cleaned with
try_cast, dropDuplicates and cache, a count, a collect, customers read with inferSchema, a left
join, a daily aggregation, one big partitioned write, an append), killed in its big write and
resumed. What the resumed application computed is counted from Spark's own event log; what the
dry run promised, what the journal says and what the report shows must all be that."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

from sparkrecover.journal import read_journal
from sparkrecover.planning import reading
from sparkrecover.rundir.runs import Run
from tests.e2e.support import APPS, map_tasks
from tests.helpers import SPARK_OPTIONS, dry_run, run_cli, spark_events, sparkrecover_command
from tests.references import FOLDER

pytestmark = pytest.mark.e2e
APP = os.path.join(APPS, "nightly_orders.py")
WRITE = 24  # repartition(24, "day")
KILL_AT = 17  # committed write partitions when the driver is killed


def seed(folder) -> None:
    """Messy orders (bad dates, empty and negative amounts, words for numbers, duplicate lines) in
    three files, and customers some orders have no row for: the same bytes every time."""
    draw = random.Random(28)
    lines = []
    for order in range(6000):
        day = f"2026-{1 + order % 3:02d}-{1 + draw.randrange(28):02d}"
        amount = f"{draw.uniform(1, 500):.2f}"
        roll = draw.random()
        day = "2026-13-45" if roll < 0.02 else "" if roll < 0.03 else day
        amount = "" if roll > 0.97 else f"-{amount}" if roll > 0.95 else "n/a" if roll > 0.94 else amount
        lines.append(f"{order},{draw.randrange(300)},{day},{amount}")
        if draw.random() < 0.03:
            lines.append(lines[-1])
    os.makedirs(os.path.join(folder, "orders"))
    for part in range(3):
        with open(os.path.join(folder, "orders", f"part-{part}.csv"), "w") as handle:
            handle.write("order_id,customer_id,order_date,amount\n" + "\n".join(lines[part::3]) + "\n")
    with open(os.path.join(folder, "customers.csv"), "w") as handle:
        handle.write("customer_id,name,country,since\n")
        handle.writelines(f"{c},customer {c},{'FR DE NL ES'.split()[c % 4]},{2010 + c % 15}\n" for c in range(280))


def arguments(folder) -> list[str]:
    return [f"{folder}/orders", f"{folder}/customers.csv", f"{folder}/out", f"{folder}/history"]


def rows(spark, path: str) -> Counter:
    return Counter(tuple(row) for row in spark.read.parquet(path).collect())


def test_a_new_user_script_killed_in_its_write_resumes_computing_only_what_is_missing(spark, plain_runs, tmp_path):
    plain = plain_runs.start(APP, *arguments(FOLDER), seed=seed)
    seed(tmp_path)
    root, logs = str(tmp_path / "root"), str(tmp_path / "event-logs")
    run_dir = os.path.join(root, "night")
    os.makedirs(logs)
    options = [*SPARK_OPTIONS, "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={logs}"]
    options += ["--conf", "spark.eventLog.compress=false"]
    command = sparkrecover_command("submit", "--root", root, "--run-id", "night", "--", *options, APP)

    def committed() -> int:
        with contextlib.suppress(Exception):
            journal = read_journal(run_dir)
            writes = {e["stage"] for e in journal if e["type"] == "write.started" and e["partitions"] == WRITE}
            return len({e["partition"] for e in journal if e["type"] == "task.committed" and e["stage"] in writes})
        return 0

    env = {**os.environ, "WRITE_SLEEP": "1"}
    process = subprocess.Popen(
        command + arguments(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while committed() < KILL_AT:
            assert process.poll() is None and time.monotonic() < deadline, "the kill point was not reached"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)

    plan = dry_run(root, "night")
    (write,) = [s for s in plan["stages"] if s["decision"] == "continue"]
    assert write["partitions"]["total"] == WRITE and write["partitions"]["kept"] >= KILL_AT
    offered = write["shuffle_maps"]["kept"]
    assert offered == write["shuffle_maps"]["total"] > 0

    done = run_cli("resume", "night", "--root", root, "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    # The terminal is left to sparkrecover and the application: no Spark INFO line, and not the
    # ERROR Spark logs for a map stage whose outputs were all reused (nothing failed).
    assert " INFO " not in done.stderr and "No stages registered" not in done.stderr, done.stderr[-3000:]
    journal = read_journal(run_dir)

    # The count, the collect and the inference are replayed: the write's job is the resumed
    # application's first, and the cache the count filled in attempt 1 is filled inside the write.
    (started,) = [e for e in journal if e["type"] == "driver.started" and e["attempt"] == 2]
    jobs = spark_events(logs, started["app_id"], "SparkListenerJobStart")
    assert jobs[0]["Properties"].get("sparkrecover.stage") == write["stage"]
    assert not [e for e in journal if e["type"] == "action.recorded" and e["attempt"] == 2]

    # Every shuffle of attempt 1's write was planned again with the same identity and reused whole,
    # and so was the cache's own (its dropDuplicates), kept by attempt 1's count and planned by the
    # write now (a shuffle that fills a cache is named by the cache's plan, not by the query that
    # fills it: docs/shuffles.md); the only map tasks Spark ran are those of the append, which
    # attempt 1 never reached.
    first = {e["shuffle"] for e in journal if e["type"] == "shuffle.registered" and e["attempt"] == 1}
    again = [e for e in journal if e["type"] == "shuffle.registered" and e["attempt"] == 2]
    written = {
        e["shuffle"]
        for e in journal
        if e["type"] == "shuffle.registered" and e["attempt"] == 1 and e["stage"] == write["stage"]
    }
    cached = next(e["shuffle"] for e in journal if e["type"] == "shuffle.registered")  # the count filled it first
    assert written and written <= {e["shuffle"] for e in again} and cached not in written
    assert cached in {e["shuffle"] for e in again if e["stage"] == write["stage"]}
    assert all(e["reused"] == e["maps"] for e in again if e["shuffle"] in first)
    assert sum(e["reused"] for e in again if e["shuffle"] in written) == offered  # the dry run's figure
    assert map_tasks(logs, started["app_id"]) == sum(e["maps"] - e["reused"] for e in again)
    assert all(e["stage"] != write["stage"] for e in again if e["reused"] < e["maps"])

    # The write computed only its missing partitions; no task was journaled for a job the write
    # ran before it started, nor for a partition it kept.
    (resumed,) = [
        e for e in journal if e["type"] == "write.started" and e["attempt"] == 2 and e["stage"] == write["stage"]
    ]
    assert len(resumed["kept"]) == write["partitions"]["kept"]
    for attempt in (1, 2):
        records = [e for e in journal if e["attempt"] == attempt and e.get("stage") == write["stage"]]
        types = [e["type"] for e in records]
        assert "task.committed" not in types[: types.index("write.started")]
    computed = {
        e["partition"]
        for e in journal
        if e["type"] == "task.committed" and e["attempt"] == 2 and e["stage"] == write["stage"]
    }
    assert computed == set(range(WRITE)) - set(resumed["kept"])

    out = glob.glob(os.path.join(tmp_path, "out", "daily-*"))
    assert [os.path.basename(p) for p in out] == [os.path.basename(p) for p in glob.glob(plain.path("out", "daily-*"))]
    assert rows(spark, out[0]) == rows(spark, glob.glob(plain.path("out", "daily-*"))[0])
    assert rows(spark, str(tmp_path / "history")) == rows(spark, plain.path("history"))

    # The report says what the command said it saved, and draws what was reused as kept (the
    # cache's map outputs too: the write filled the cache this time).
    collected, damage = reading.load_report(Run("night", run_dir))
    report = collected.report(run_dir)
    assert not damage
    assert report.saved_s == summary["saved_s"] > 0
    shuffles = [g for g in report.grids if g.kind == "shuffle" and g.stage == write["stage"]]
    assert sum(g.count("kept") for g in shuffles) == sum(e["reused"] for e in again if e["stage"] == write["stage"])
