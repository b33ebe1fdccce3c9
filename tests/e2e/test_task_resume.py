"""Task-level resume end to end: one write killed half-way keeps its committed partitions, and the
resume computes only the others (real spark-submit, real SIGKILL, the committer's real files)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
from collections.abc import Callable

import orjson
import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.journal import read_journal
from tests.helpers import SPARK_OPTIONS, dry_run, events_of, run_and_kill_when, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e
APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "apps", "one_write.py")
PARTS = 16


def computed_since(markers: str, since_ns: int) -> set[int]:
    """The partitions whose first row was computed after ``since_ns``."""
    found = set()
    for name in os.listdir(markers):
        partition, stamp = name.split("-")
        if int(stamp) > since_ns:
            found.add(int(partition))
    return found


def task_commits(run_dir: str, attempt: int) -> int:
    """Partitions ``attempt`` computed and committed so far, as the run's own fold reads the
    journal (a partition kept from an earlier attempt commits again, empty: not counted)."""
    state = RunState.from_events("night", read_journal(run_dir))
    return sum(1 for stage in state.stages.values() for by, _ in stage.committed_tasks.values() if by == attempt)


def submit_until(root: str, out: str, markers: str, commits: int, variant: str = "overwrite", app: str = APP) -> int:
    """Submit the app (or a copy of it) and SIGKILL it once ``commits`` task commits are journaled;
    returns the time of the kill (ns)."""
    return run_until(
        sparkrecover_command(
            "submit",
            "--root",
            root,
            "--run-id",
            "night",
            "--flush-interval",
            "0.2",
            "--",
            *SPARK_OPTIONS,
            app,
            out,
            markers,
            str(PARTS),
            variant,
        ),
        os.path.join(root, "night"),
        1,
        commits,
    )


def run_until(
    command: list[str],
    run_dir: str,
    attempt: int,
    commits: int,
    env: dict[str, str] | None = None,
    until: Callable[[], bool] | None = None,
    timeout: float = 240,
    stop: Callable[[subprocess.Popen], None] | None = None,
) -> int:
    """Run ``command`` in its own process group and SIGKILL it (or ``stop`` it) once ``attempt``
    journaled ``commits`` task commits (or once ``until()`` says so); returns the time of the kill
    (ns)."""
    if until is None:
        return run_and_kill_when(
            command,
            lambda: task_commits(run_dir, attempt) >= commits,
            f"{commits} task commits",
            env=env,
            timeout=timeout,
            stop=stop,
        )
    return run_and_kill_when(command, until, "the awaited journal records", env=env, timeout=timeout, stop=stop)


def rows(spark, folder: str) -> list[tuple[int, int]]:
    return sorted((r.id, r.tripled) for r in spark.read.parquet(folder).collect())


def committed_by(run_dir: str, attempt: int) -> set[int]:
    """The partitions of the unfinished write that ``attempt`` computed and committed."""
    state = RunState.from_events("night", read_journal(run_dir))
    return {p for stage in state.stages.values() for p, (by, _) in stage.committed_tasks.items() if by == attempt}


def test_a_killed_write_keeps_its_committed_partitions_and_each_resume_computes_only_the_rest(spark, tmp_path):
    """One run killed twice, for two claims that would each need their own killed run: a killed
    write keeps its committed partitions and its resume computes only the rest, and a resume killed
    during its write resumes again exactly."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    run_dir = os.path.join(root, "night")
    killed_at = submit_until(root, out, markers, commits=7)
    assert glob.glob(os.path.join(out, "_temporary", "0", "task_*"))  # the committer's evidence

    dry = run_cli("resume", "night", "--root", root, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    (stage,) = orjson.loads(dry.stdout)["stages"]
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert 7 <= kept < PARTS and stage["partitions"]["total"] == PARTS
    assert stage["reason"].startswith(f"{kept}/{PARTS} partitions kept (committed in attempt 1)")
    first = committed_by(run_dir, 1)
    assert len(first) == kept, (first, kept)

    # The resume computes only the partitions not kept: here it is killed during its write.
    second_kill = run_until(sparkrecover_command("resume", "night", "--root", root), run_dir, 2, commits=3)
    assert computed_since(markers, killed_at).isdisjoint(first), "the resume computed a kept partition again"
    second = orjson.loads(run_cli("resume", "night", "--root", root, "--dry-run", "--json").stdout)["stages"][0]
    assert second["decision"] == "continue", second
    # Kept from both dead attempts: the first's set aside, the second's committed in its own job.
    assert second["partitions"]["kept"] >= kept + 3
    assert "committed in attempt 1, 2" in second["reason"]
    both = first | committed_by(run_dir, 2)
    assert second["partitions"]["kept"] == len(both), (second, both)

    # A resume killed during its write resumes again exactly: only the rest is computed.
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert computed_since(markers, second_kill) == set(range(PARTS)) - both  # kept ones were not computed

    assert rows(spark, out) == [(i, i * 3) for i in range(PARTS * 100)]
    names = sorted(os.listdir(out))
    data = [n for n in names if n.startswith("part-")]
    assert len(data) == PARTS and sorted({n[:10] for n in data}) == [f"part-{p:05d}" for p in range(PARTS)]
    assert "_SUCCESS" in names and "_temporary" not in names
    assert not glob.glob(os.path.join(str(tmp_path), ".sparkrecover-kept-*"))
    started = [e for e in events_of(run_dir) if e["type"] == "write.started"]
    assert [(e["attempt"], len(e["kept"])) for e in started] == [(1, 0), (2, kept), (3, len(both))]


def planned(root: str) -> dict:
    """The dry run's plan for the app's one write."""
    (stage,) = dry_run(root, "night")["stages"]
    return stage


def files_by_partition(out: str) -> dict[str, int]:
    """Data files below ``out`` (partition folders included), counted by part number."""
    counts: dict[str, int] = {}
    for _, dirs, names in os.walk(out):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            if name.startswith("part-"):
                counts[name[:10]] = counts.get(name[:10], 0) + 1
    return counts


@pytest.mark.parametrize("variant", ["append", "partitioned", "checkpoint", "stage"])
def test_append_partitioned_and_declared_writes_keep_their_tasks_too(spark, tmp_path, variant):
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    seed = []
    if variant == "append":  # what the folder held before: kept once, the append lands once
        spark.range(-5, 0).selectExpr("id", "id * 3 AS tripled").write.parquet(out)
        seed = [(i, i * 3) for i in range(-5, 0)]
    before = files_by_partition(out) if seed else {}
    killed_at = submit_until(root, out, markers, commits=6, variant=variant)
    stage = planned(root)
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed_since(markers, killed_at)) == PARTS - kept
    assert rows(spark, out) == sorted(seed + [(i, i * 3) for i in range(PARTS * 100)])
    per_part = 3 if variant == "partitioned" else 1  # one file per bucket a partition holds
    counts = files_by_partition(out)
    assert counts == {f"part-{p:05d}": per_part + before.get(f"part-{p:05d}", 0) for p in range(PARTS)}
    assert "_temporary" not in os.listdir(out)
    assert not glob.glob(os.path.join(str(tmp_path), ".sparkrecover-kept-*"))


def test_a_write_after_a_round_robin_repartition_keeps_its_partitions(spark, tmp_path):
    """Spark sorts a round-robin repartition's input first, so its partitions are UNORDERED, not
    INDETERMINATE: partition i holds the same rows again (INDETERMINATE writes:
    tests/e2e/test_post_shuffle_write.py)."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    submit_until(root, out, markers, commits=4, variant="shuffled")
    stage = planned(root)
    assert stage["decision"] == "continue", stage
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows(spark, out) == [(i, i * 3) for i in range(PARTS * 100)]
    assert len(files_by_partition(out)) == PARTS


def test_a_kill_during_the_job_commit_reruns_the_write_whole(spark, tmp_path):
    """The committer's merge had begun when the driver died (here: one committed task's file
    already moved into the target, as FileOutputCommitter's mergePaths does): what is left cannot
    be trusted, so the write runs whole and the output is still exact."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    submit_until(root, out, markers, commits=5)
    task = sorted(glob.glob(os.path.join(out, "_temporary", "0", "task_*")))[0]
    moved = next(name for name in os.listdir(task) if name.startswith("part-"))
    os.rename(os.path.join(task, moved), os.path.join(out, moved))
    stage = planned(root)
    assert stage["decision"] == "run", stage
    assert "job commit had begun" in stage["reason"]
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert rows(spark, out) == [(i, i * 3) for i in range(PARTS * 100)]
    assert len(files_by_partition(out)) == PARTS


def test_a_write_whose_query_changed_keeps_nothing_and_says_why(spark, tmp_path):
    """Rule 5 holds inside a write: kept partitions were computed by the old query."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    killed_at = submit_until(root, out, markers, commits=5)
    assert planned(root)["decision"] == "continue"
    resumed = run_cli("resume", "night", "--root", root, env={**os.environ, "ONE_WRITE_NOTE": "v2"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed_since(markers, killed_at)) == PARTS
    events = [e for e in events_of(os.path.join(root, "night")) if e["attempt"] == 2]
    (invalidated,) = [e for e in events if e["type"] == "stage.invalidated"]
    assert invalidated["reason"] == "plan changed"
    assert [e["kept"] for e in events if e["type"] == "write.started"] == [[]]
    assert sorted((r.id, r.tripled, r.note) for r in spark.read.parquet(out).collect()) == [
        (i, i * 3, "v2") for i in range(PARTS * 100)
    ]


def test_an_edited_script_keeps_nothing(spark, tmp_path):
    """A UDF's body does not show in the query plan: the script's own code is part of the write's
    shape, so partitions an earlier version of the script computed are not kept."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    app = tmp_path / "one_write.py"
    app.write_text(open(APP).read())
    killed_at = submit_until(root, out, markers, commits=5, app=str(app))
    assert planned(root)["decision"] == "continue"
    app.write_text(open(APP).read() + "\n# edited after the crash\n")
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed_since(markers, killed_at)) == PARTS
    started = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"]
    assert started[-1]["kept"] == [] and "script's code" in started[-1]["reason"]
    assert rows(spark, out) == [(i, i * 3) for i in range(PARTS * 100)]


MANIFEST_COMMITTER = [
    "--conf",
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.file="
    "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory",
    "--conf",
    "spark.sql.sources.commitProtocolClass=org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
]


@pytest.mark.skipif(
    int(__import__("pyspark").__version__.split(".")[0]) < 4,
    reason="Spark 3.5's Hadoop 3.3.4 has no manifest committer",
)
@pytest.mark.parametrize(("variant", "stopped_by"), [("overwrite", None), ("append", None), ("overwrite", "SIGTERM")])
def test_a_write_through_the_manifest_committer_keeps_its_committed_task_manifests(
    spark, tmp_path, variant, stopped_by
):
    """Hadoop's manifest committer (ABFS's and GCS's, here on a local folder), bound as Spark's docs
    bind it: a committed task is a manifest naming files left in the dead job's folder. The resume
    adopts them where they are and computes only the other partitions; the output ends as one
    uninterrupted write leaves it. A driver stopped by SIGTERM (to sparkrecover submit, as clusters
    stop drivers) leaves them as a SIGKILL does."""
    root, out, markers = str(tmp_path / "root"), str(tmp_path / "out"), str(tmp_path / "markers")
    seed = []
    if variant == "append":
        spark.range(-5, 0).selectExpr("id", "id * 3 AS tripled").write.parquet(out)
        seed = [(i, i * 3) for i in range(-5, 0)]
    command = sparkrecover_command(
        "submit", "--root", root, "--run-id", "night", "--flush-interval", "0.2", "--",
        *SPARK_OPTIONS, *MANIFEST_COMMITTER, APP, out, markers, str(PARTS), variant,
    )  # fmt: skip
    exits: list[int] = []

    def sigterm(process) -> None:
        process.send_signal(signal.SIGTERM)
        exits.append(process.wait(timeout=120))

    killed_at = run_until(command, os.path.join(root, "night"), 1, commits=6, stop=sigterm if stopped_by else None)
    assert exits == ([143] if stopped_by else [])
    manifests = glob.glob(os.path.join(out, "_temporary", "*", "*", "manifests", "*-manifest.json"))
    assert len(manifests) >= 6, os.listdir(out)
    stage = planned(root)
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert 6 <= kept < PARTS
    if variant == "overwrite" and not stopped_by:
        # A resume killed during its write (after it adopted the manifests into its own job's
        # folder, their files still in the dead job's) resumes again exactly.
        run_dir = os.path.join(root, "night")
        first = committed_by(run_dir, 1)
        assert len(first) == kept
        second_kill = run_until(sparkrecover_command("resume", "night", "--root", root), run_dir, 2, commits=3)
        assert computed_since(markers, killed_at).isdisjoint(first), "the resume computed a kept partition again"
        both = first | committed_by(run_dir, 2)
        assert planned(root)["partitions"]["kept"] == len(both)
        killed_at, kept = second_kill, len(both)
    resumed = run_cli("resume", "night", "--root", root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed_since(markers, killed_at)) == PARTS - kept
    assert rows(spark, out) == sorted(seed + [(i, i * 3) for i in range(PARTS * 100)])
    assert sorted(files_by_partition(out)) == [f"part-{p:05d}" for p in range(PARTS)]
    assert "_temporary" not in os.listdir(out)
    writes = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"]
    assert writes[1]["kept_dir"].endswith("/manifests") and "/_temporary/" in writes[1]["kept_dir"]
