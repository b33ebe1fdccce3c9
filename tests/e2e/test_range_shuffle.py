"""A write after a sort, end to end (real spark-submit, real SIGKILL, adaptive execution on): the
range shuffle's map outputs are kept with the bounds they were partitioned by, and the resumed
application partitions by those bounds instead of its own sample, so it runs none of its map tasks
and keeps the write's committed partitions (tests/apps/shuffle_write.py, shapes ``agg`` then
``sortagg``: the first write is skipped on resume, so the resumed application's RDD ids, which
seed the sample, differ)."""

from __future__ import annotations

import collections
import contextlib
import glob
import os

import pytest

from sparkrecover.journal import read_journal
from sparkrecover.rundir import keep
from tests.e2e.support import (
    FLUSH_OFTEN,
    SHUFFLE_WRITE,
    SHUFFLING,
    Hold,
    computed,
    map_tasks,
    run_and_kill,
    s3a_jars,
    s3a_options,
    submit_command,
)
from tests.helpers import dry_run, run_cli

pytestmark = pytest.mark.e2e
MAPS, WRITES, ROWS = 6, 8, 100  # ROWS: per map partition (tests/apps/shuffle_write.py)
KILL_AT = 3  # the sort's write is killed once 3 of its partitions committed, the next ones held


@pytest.mark.parametrize("store", ["local", "s3"])
def test_a_write_after_a_sort_killed_mid_write_reuses_the_range_shuffle_and_its_committed_partitions(
    spark, tmp_path, request, store
):
    """With the run root on a local disk (java.nio) or on S3 (moto through s3a: the bounds go
    through Hadoop's FileSystem, as the map outputs do)."""
    out, markers, logs = (str(tmp_path / name) for name in ("out", "markers", "logs"))
    options = [*SHUFFLING]
    if store == "s3":
        if not s3a_jars():
            pytest.skip("no hadoop-aws jars: run scripts/fetch_s3a_jars.py (setup.sh test does)")
        s3 = request.getfixturevalue("s3")
        root, run_dir = s3.prefix + "/runs", s3.prefix + "/runs/night"
        options += s3a_options(s3.endpoint)
    else:
        root = str(tmp_path / "root")
        run_dir = os.path.join(root, "night")
    os.makedirs(logs)
    options += ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={logs}"]
    options += ["--conf", "spark.eventLog.compress=false"]
    app_args = [out, markers, "agg,sortagg", str(MAPS), str(WRITES)]
    command = submit_command(root, "night", SHUFFLE_WRITE, *app_args, spark_options=options, submit_options=FLUSH_OFTEN)

    def sort_commits_and_every_map_output_kept() -> bool:
        """Killed in the write once its map outputs are durable: copies to a remote keep folder
        run in the background and may still be under way when the write's first tasks commit
        (the held tasks wait for them)."""
        with contextlib.suppress(Exception):
            journal = [e for e in read_journal(run_dir) if (e.get("stage") or "").endswith("/sortagg")]
            commits = sum(e["type"] == "task.committed" for e in journal)
            kept_maps = sum(len(e["maps"]) for e in journal if e["type"] == "shuffle.committed")
            return commits >= KILL_AT and kept_maps >= MAPS + WRITES
        return False

    held = Hold(tmp_path).env(KILL_AT, SHUFFLE_WRITE_SLEEP="0")
    killed_at = run_and_kill(command, sort_commits_and_every_map_output_kept, "the kill point", env=held)
    (stage,) = [s for s in dry_run(root, "night")["stages"] if s["decision"] == "continue"]
    kept = stage["partitions"]["kept"]
    assert kept == KILL_AT and stage["partitions"]["total"] == WRITES, stage
    assert stage["shuffle_maps"]["kept"] == stage["shuffle_maps"]["total"] == MAPS + WRITES, stage

    # The bounds were saved beside the kept map outputs before any of them was journaled.
    (registered,) = [e for e in read_journal(run_dir) if e["type"] == "shuffle.registered" and e.get("bounds")]
    size_of = keep.size_reader(run_dir)
    assert size_of is not None and size_of(f"{registered['shuffle']}/bounds")

    resumed = run_cli("resume", "night", "--root", root, env={**os.environ, "SHUFFLE_WRITE_SLEEP": "0"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    journal = read_journal(run_dir)

    # The range shuffle kept its bounds; the resumed application sampled others and used the kept
    # ones (without them it would partition rows elsewhere, and keep nothing of the write).
    ranged = {e["attempt"]: e for e in journal if e["type"] == "shuffle.registered" and e.get("bounds") is not None}
    assert sorted(ranged) == [1, 2]
    assert ranged[1]["shuffle"] == ranged[2]["shuffle"]
    assert ranged[1]["bounds"] == ranged[1]["sampled_bounds"] == ranged[2]["bounds"]
    assert ranged[2]["sampled_bounds"] != ranged[2]["bounds"]
    assert ranged[2]["reused"] == ranged[2]["maps"] == WRITES
    assert not [e for e in journal if e["type"] == "shuffle.unsupported"]

    # Counted from inside: Spark ran no shuffle map task (the groupBy's and the sort's outputs
    # were all reused), and the write computed only the partitions it had not committed.
    (started,) = [e for e in journal if e["type"] == "driver.started" and e["attempt"] == 2]
    assert map_tasks(logs, started["app_id"]) == 0
    assert computed(os.path.join(markers, "sortagg"), "map", killed_at) == []
    assert len(computed(os.path.join(markers, "sortagg"), "write", killed_at)) == WRITES - kept
    writes = [e for e in journal if e["type"] == "write.started" and e["partitions"] == WRITES]
    assert len(writes[-1]["kept"]) == kept

    # The output is what one uninterrupted run writes: every group once, in range order.
    rows = spark.read.parquet(os.path.join(out, "sortagg")).select("g", "s").collect()
    assert collections.Counter(tuple(r) for r in rows) == collections.Counter((i, i) for i in range(MAPS * ROWS))
    files = sorted(glob.glob(os.path.join(out, "sortagg", "part-*")))
    assert len(files) == WRITES
    ranges = [spark.read.parquet(f).agg({"s": "min"}).first()[0] for f in files]
    assert ranges == sorted(ranges, reverse=True)  # partition i holds the i-th range, descending
