"""Shuffle map outputs kept across driver death, end to end: real spark-submit, real SIGKILL of the
driver's process group, adaptive execution on (tests/apps/shuffle_job.py). The app counts what each
attempt computed from inside (marker files); outputs are compared as row multisets with what one
uninterrupted run computes."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable

import pytest

from sparkrecover.journal import read_journal
from tests.e2e.support import (
    FLUSH_OFTEN,
    SHUFFLE_JOB,
    SHUFFLE_WRITE,
    SHUFFLING,
    Hold,
    needs_s3a,
    run_and_kill,
    s3a_options,
    submit_command,
)
from tests.helpers import dry_run, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e
MAPS, ROWS = 12, 1000


@pytest.fixture
def job(spark, tmp_path):
    """The inputs (one Parquet file per map partition) and the paths of one run."""
    source = tmp_path / "in"
    spark.range(0, MAPS * ROWS, numPartitions=MAPS).write.parquet(str(source / "left"))
    spark.range(0, 97).selectExpr("id AS rid", "id * 2 AS weight").coalesce(1).write.parquet(str(source / "right"))
    return {
        "root": str(tmp_path / "root"),
        "run_dir": str(tmp_path / "root" / "night"),
        "source": str(source),
        "out": str(tmp_path / "out"),
        "markers": str(tmp_path / "markers"),
    }


def markers(job: dict, prefix: str, since_ns: int = 0) -> list[str]:
    if not os.path.isdir(job["markers"]):
        return []
    return [m for m in os.listdir(job["markers"]) if m.startswith(prefix) and int(m.rsplit("-", 1)[1]) > since_ns]


def submit_job_and_kill(job: dict, variant: str, done: Callable[[], bool], sink: str = "collect") -> int:
    """Submit the job, its result tasks from partition 1 on held (the result stage stays in flight
    until the kill), and SIGKILL it once ``done()``; returns the time of the kill (ns)."""
    app_args = [job["source"], job["out"], job["markers"], variant, sink]
    command = submit_command(
        job["root"], "night", SHUFFLE_JOB, *app_args, spark_options=SHUFFLING, submit_options=FLUSH_OFTEN
    )
    return run_and_kill(command, done, "the kill point", env=held(job), timeout=300)


def held(job: dict) -> dict[str, str]:
    return Hold(os.path.dirname(job["root"])).env(1)


def in_the_result_stage(job: dict, results: int = 2, since_ns: int = 0) -> Callable[[], bool]:
    """The predicate "``results`` result rows marked (since ``since_ns``) and every map output of
    every shuffle the latest attempt registered journaled, by it or an earlier attempt": all a
    kill in the (held) result stage keeps."""

    def ready() -> bool:
        if len(markers(job, "w-", since_ns)) < results:
            return False
        records = read_journal(job["run_dir"])
        registered = [e for e in records if e["type"] == "shuffle.registered"]
        latest = max((e["attempt"] for e in registered), default=0)
        committed = [e for e in records if e["type"] == "shuffle.committed"]
        kept = Counter(shuffle for shuffle, _ in {(e["shuffle"], m["map"]) for e in committed for m in e["maps"]})
        return bool(registered) and all(kept[e["shuffle"]] >= e["maps"] for e in registered if e["attempt"] == latest)

    return ready


def resume(job: dict, env: dict | None = None) -> str:
    """Resume the run; what it printed on stderr (the driver's log among it)."""
    done = run_cli("resume", "night", "--root", job["root"], timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


# A user's own log4j2 configuration in $SPARK_CONF_DIR, which sparkrecover uses untouched: Spark's
# INFO lines on stderr, each marked so the test can tell it is this configuration that logged.
USER_LOG4J2 = """rootLogger.level = info
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = USERLOG %p %c{1}: %m%n
"""


def events(job: dict, kind: str, attempt: int | None = None) -> list[dict]:
    return [
        e for e in read_journal(job["run_dir"]) if e["type"] == kind and (attempt is None or e["attempt"] == attempt)
    ]


def kept_maps(job: dict) -> int:
    return sum(len(e["maps"]) for e in events(job, "shuffle.committed", 1))


def expected(variant: str) -> Counter:
    """The rows one uninterrupted run of the job computes, as a multiset."""
    totals: dict[int, list[int]] = {}
    for value in range(MAPS * ROWS):
        entry = totals.setdefault(value % 16, [0, 0])
        entry[0] += 1
        entry[1] += 2 * (value % 97) if variant == "join" else value
    return Counter((k, n, total) for k, (n, total) in totals.items())


def output(job: dict, spark=None) -> Counter:
    if spark is not None:
        return Counter((r.k, r.n, r.total) for r in spark.read.parquet(job["out"]).collect())
    with open(job["out"]) as handle:
        rows = [json.loads(line) for line in handle]
    return Counter((r["k"], r["n"], r["total"]) for r in rows)


def test_kills_in_the_map_stage_and_in_its_resume_run_only_the_missing_map_tasks(job):
    """One scenario for two claims (each would need its own killed run): a kill in the map stage
    runs only the missing map tasks, and a second kill during the resumed map stage loses nothing."""
    # A kill in the map stage: what was journaled before it is kept, and the plan says so.
    first_kill = submit_job_and_kill(job, "agg", lambda: len(markers(job, "m-")) >= MAPS // 2)
    kept = kept_maps(job)
    started = len(markers(job, "m-"))
    assert kept >= started - 4  # on local[2]: at most 2 running, at most 2 not yet journaled
    plan = dry_run(job["root"], "night")
    assert [entry["kept"] for entry in plan["shuffles"]] == [kept]

    # Its resume runs only the missing map tasks: killed again during that map stage.
    command = sparkrecover_command("resume", "night", "--root", job["root"])
    second_kill = run_and_kill(
        command,
        lambda: len(events(job, "shuffle.committed", 2)) >= 1 and len(markers(job, "m-")) >= 9,
        "the kill point",
        timeout=300,
    )
    # (The markers name input files, the journal map partitions: they are compared by count.)
    assert len(markers(job, "m-", first_kill)) <= MAPS - kept, "the resume computed a kept map output again"
    (registered,) = events(job, "shuffle.registered", 2)
    assert registered["reused"] == kept and registered["maps"] == MAPS

    # A second kill during the resumed map stage loses nothing: the next resume computes only the
    # map outputs neither dead attempt journaled.
    second = {m["map"] for e in events(job, "shuffle.committed") for m in e["maps"]}
    assert len(second) > kept
    resume(job)
    assert len(markers(job, "m-", second_kill)) == MAPS - len(second)  # only the missing map tasks ran
    assert output(job) == expected("agg")
    (registered,) = events(job, "shuffle.registered", 3)
    assert registered["reused"] == len(second) and registered["maps"] == MAPS
    assert not os.path.exists(os.path.join(job["run_dir"], "shuffles"))  # removed: the run succeeded


def test_a_kill_in_the_write_after_a_shuffle_computes_no_map_task(job, spark):
    submit_job_and_kill(job, "agg", in_the_result_stage(job), sink="write")
    (stage,) = dry_run(job["root"], "night")["stages"]
    assert stage["decision"] == "run", stage
    kept, total = stage["shuffle_maps"]["kept"], stage["shuffle_maps"]["total"]
    assert kept == total and total % MAPS == 0
    assert stage["reason"].endswith(f", {kept}/{total} shuffle map outputs kept"), stage["reason"]
    since = time.time_ns()
    conf = os.path.join(os.path.dirname(job["root"]), "conf")
    os.makedirs(conf)
    with open(os.path.join(conf, "log4j2.properties"), "w") as handle:
        handle.write(USER_LOG4J2)
    said = resume(job, env={**os.environ, "SPARK_CONF_DIR": conf})
    assert markers(job, "m-", since) == []
    assert output(job, spark) == expected("agg")
    # The user's configuration logged the driver's INFO lines, DAGScheduler's among them, but not
    # the ERROR Spark logs for a map stage whose outputs were all reused (nothing failed).
    assert "USERLOG INFO DAGScheduler: Job " in said, said[-3000:]
    assert "No stages registered" not in said, said[-3000:]


def test_a_kept_map_output_deleted_or_truncated_is_computed_again(job):
    submit_job_and_kill(job, "agg", in_the_result_stage(job))
    maps = sorted((m for e in events(job, "shuffle.committed", 1) for m in e["maps"]), key=lambda m: m["map"])
    assert len(maps) == MAPS
    keep = os.path.join(job["run_dir"], "shuffles")
    os.remove(os.path.join(keep, maps[0]["path"], "data"))
    with open(os.path.join(keep, maps[1]["path"], "data"), "r+b") as handle:
        handle.truncate(maps[1]["data_bytes"] - 7)
    assert dry_run(job["root"], "night")["shuffles"][0]["kept"] == MAPS - 2
    since = time.time_ns()
    resume(job)
    assert len(markers(job, "m-", since)) == 2
    assert output(job) == expected("agg")


def test_an_indeterminate_map_stage_runs_whole_and_says_why(job):
    # Killed in the write, once the refusal is journaled: the JVM's line for it waits for the next
    # drain (the flush interval), which under load can come after the first results.
    submit_job_and_kill(
        job,
        "indeterminate",
        lambda: len(markers(job, "w-")) >= 2 and bool(events(job, "shuffle.unsupported", 1)) and kept_maps(job) >= MAPS,
    )
    refused = [e for e in events(job, "shuffle.unsupported", 1) if "INDETERMINATE" in e["reason"]]
    assert len(refused) == 1  # the round-robin repartition after the groupBy
    # The plan keeps nothing of it and says why, for that shuffle (the groupBy's are all kept).
    (not_kept,) = dry_run(job["root"], "night")["shuffles_not_kept"]
    assert not_kept["shuffle"] is None and not_kept["spark_shuffle"] == refused[0]["spark_shuffle"]
    assert "INDETERMINATE" in not_kept["reason"]
    shown = run_cli("resume", "night", "--root", job["root"], "--dry-run")
    assert f"Spark shuffle {not_kept['spark_shuffle']}: not kept: " in shown.stdout + shown.stderr
    since = time.time_ns()
    resume(job)
    assert markers(job, "m-", since) == []  # the deterministic groupBy's map side is still reused
    assert output(job) == expected("indeterminate")
    assert len([e for e in events(job, "shuffle.unsupported", 2) if "INDETERMINATE" in e["reason"]]) == 1


def test_a_sort_after_an_aggregation_keeps_both_shuffles_and_the_bounds_of_the_range_one(job):
    """The sort's shuffle partitions by range: its bounds are kept with its map outputs, and the
    resumed application partitions by them, so both shuffles are reused whole."""
    submit_job_and_kill(job, "sorted", in_the_result_stage(job))
    assert events(job, "shuffle.unsupported", 1) == []
    first = events(job, "shuffle.registered", 1)
    assert [e.get("bounds") is not None for e in first] == [False, True]
    assert kept_maps(job) == MAPS + first[1]["maps"]
    since = time.time_ns()
    resume(job)
    assert markers(job, "m-", since) == []  # the groupBy's map side was reused
    again = events(job, "shuffle.registered", 2)
    assert [e["shuffle"] for e in again] == [e["shuffle"] for e in first]
    assert all(e["reused"] == e["maps"] for e in again) and again[1]["bounds"] == first[1]["bounds"]
    assert output(job) == expected("agg")


def test_a_sort_merge_join_keeps_both_sides(job):
    submit_job_and_kill(job, "join", in_the_result_stage(job))
    since = time.time_ns()
    resume(job)
    assert markers(job, "m-", since) == []
    reused = events(job, "shuffle.registered", 2)
    assert len(reused) == 3 and all(e["reused"] == e["maps"] for e in reused)  # left, right, groupBy
    assert output(job) == expected("join")


def test_two_shuffles_killed_after_each_map_stage_resume_exactly(job):
    """A fully reused map stage runs no task, so its shuffle-write metrics would say 0 rows and
    adaptive execution would drop everything downstream as empty: the kept counts are added. One
    run killed twice: after the first map stage, then (its resume) after the second."""
    # Killed after the first map stage: the second shuffle is registered once the first map stage
    # is done; its map outputs are all journaled a moment later.
    first_kill = submit_job_and_kill(
        job, "two", lambda: len(events(job, "shuffle.registered", 1)) >= 2 and kept_maps(job) >= MAPS
    )
    # The resume reuses the first map stage whole and still reaches the write: had adaptive
    # execution taken the reused stage for empty, no result row (no w- marker) would come.
    command = sparkrecover_command("resume", "night", "--root", job["root"])
    reached = in_the_result_stage(job, since_ns=first_kill)
    second_kill = run_and_kill(command, reached, "the kill point", env=held(job), timeout=300)
    assert markers(job, "m-", first_kill) == []
    reused = events(job, "shuffle.registered", 2)
    assert reused[0]["reused"] == reused[0]["maps"] == MAPS, reused
    # Killed after the second map stage (in the write): both map stages reused whole, exactly.
    resume(job)
    assert markers(job, "m-", second_kill) == []
    again = events(job, "shuffle.registered", 3)
    assert len(again) == 2 and all(e["reused"] == e["maps"] for e in again), again
    assert output(job) == expected("two")


@needs_s3a
def test_empty_map_outputs_kept_on_s3_are_reused(tmp_path, s3):
    """A map task whose partition is empty writes an index and no data file. With the root on S3
    (copies through KeptHadoopStore) such an output was refused at registration, its folder
    having no data file, and its map task ran again in every resume. tests/apps/shuffle_write.py's
    ``etl``: its join spreads 50 keys over 40 partitions, leaving some empty."""
    from sparkrecover.rundir import storage

    root, writes = s3.prefix + "/runs", 40
    run_dir = storage.join(root, "night")
    app_args = [str(tmp_path / "out"), str(tmp_path / "markers"), "etl", "2", str(writes)]
    spark_options = [*SHUFFLING, *s3a_options(s3.endpoint)]
    command = submit_command(
        root, "night", SHUFFLE_WRITE, *app_args, spark_options=spark_options, submit_options=FLUSH_OFTEN
    )

    def every_map_output_kept() -> bool:
        records = read_journal(run_dir)
        registered = [e for e in records if e["type"] == "shuffle.registered"]
        kept = Counter(e["shuffle"] for e in records if e["type"] == "shuffle.committed" for _ in e["maps"])
        started = [e for e in records if e["type"] == "write.started"]
        return len(registered) == 3 and bool(started) and all(kept[e["shuffle"]] >= e["maps"] for e in registered)

    env = Hold(tmp_path).env(4, SHUFFLE_WRITE_SLEEP="0")
    run_and_kill(command, every_map_output_kept, "every map output kept", env=env, timeout=300)
    kept = [m for e in read_journal(run_dir) if e["type"] == "shuffle.committed" for m in e["maps"]]
    assert any(int(m["data_bytes"]) == 0 for m in kept), "no empty map output: the test tests nothing"

    done = run_cli("resume", "night", "--root", root, timeout=600, env={**os.environ, "SHUFFLE_WRITE_SLEEP": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    reused = [e for e in read_journal(run_dir) if e["type"] == "shuffle.registered" and e["attempt"] == 2]
    assert [(e["reused"], e["maps"]) for e in reused] == [(e["maps"], e["maps"]) for e in reused]
    assert len(reused) == 3
