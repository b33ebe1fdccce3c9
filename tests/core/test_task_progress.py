"""Task-level progress in the fold and the planner, on synthetic journals and real task folders
laid out as FileOutputCommitter leaves them (no Spark)."""

from __future__ import annotations

import glob
import os
import uuid

from sparkrecover.core.fold import kept_partitions
from sparkrecover.core.verdicts import planner
from sparkrecover.kinds import CommitKind, Verdict
from sparkrecover.planning.storage_evidence import StorageEvidence
from sparkrecover.rundir import taskfiles, tasklists
from sparkrecover.rundir.plans import KeptTasks, PartitionCount, PlanEntry
from tests.task_evidence import UUID, WRITE, manifest, pendingset, task_folder


def write_started(run, stage, partitions=8, shape="s1", reusable=True, reason=None, kept=(), specs=None):
    run.driver.emit(
        "write.started",
        stage=stage,
        partitions=partitions,
        shape=shape,
        reusable=reusable,
        reason=reason,
        kept=list(kept),
        specs=specs,
        staging=os.path.join(run.outputs[stage], "_temporary", "0"),
    )
    return run


def committed_tasks(run, stage, *partitions, records=100):
    for partition in partitions:
        run.driver.emit(
            "task.committed",
            stage=stage,
            partition=partition,
            task_attempt=0,
            spark_job=1,
            spark_stage=2,
            records=records,
            bytes=10,
        )
    return run


def decision_of(run, stage="w"):
    decisions = planner.make_plan(run.state(), StorageEvidence(run.dir))
    return next(d for d in decisions if d.stage == stage)


def test_a_write_killed_with_committed_tasks_continues_keeping_them(run):
    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0, 1, 2, 5).end(137, 9)
    for partition in (0, 1, 2, 5):
        task_folder(run.outputs["w"], partition)
    decision = decision_of(run)
    assert (decision.decision, decision.reason) == ("continue", "4/8 partitions kept (committed in attempt 1)")
    assert decision.partitions == PartitionCount(kept=4, total=8)
    assert decision.tasks == KeptTasks(kept=[0, 1, 2, 5], partitions=8, shape="s1", empty=[])
    assert decision.summary()["partitions"] == {"kept": 4, "total": 8}
    assert decision.fingerprint == {"version": None}  # the driver compares it, as for a skip


def test_journal_and_committer_must_agree(run):
    """A folder the journal never heard of, or a journaled task whose folder is gone, is computed
    again (rule 6: the journal alone is not evidence, and neither is the disk alone)."""
    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0, 1).end(137, 9)
    task_folder(run.outputs["w"], 1)
    task_folder(run.outputs["w"], 3)  # committed after the last journal flush
    assert decision_of(run).tasks.kept == [1]


def test_no_evidence_left_means_run(run):
    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0, 1).end(1)  # a failed job: abortJob removed _temporary
    decision = decision_of(run)
    assert decision.decision == "run"
    assert decision.reason.endswith("; no partition is kept: the partitions it committed left no files")


def test_partitions_that_may_differ_are_not_kept_and_the_plan_says_why(run):
    run.started("w")
    write_started(run, "w", reusable=False, reason="the write's RDD is INDETERMINATE")
    committed_tasks(run, "w", 0, 1).end(137, 9)
    task_folder(run.outputs["w"], 0)
    decision = decision_of(run)
    assert decision.decision == "run"
    assert decision.reason == (
        "started in attempt 1 but not committed; no partition is kept: the write's RDD is INDETERMINATE"
    )


def test_a_write_task_level_resume_does_not_apply_to_says_why_it_keeps_nothing(run):
    """A table write, a sink, an RDD save (the driver journals ``whole`` on its ``stage.started``):
    its tasks may have committed, but the plan says why none is kept."""
    whole = "it writes table sales, and only a write to a path keeps its committed partitions"
    run.driver.emit(
        "stage.started", stage="t", kind="write", outputs=[], upstream=[], fingerprint={"version": None}, whole=whole
    )
    run.end(137, 9)
    decision = decision_of(run, "t")
    assert (decision.decision, decision.reason) == (
        "run",
        "started in attempt 1 but not committed; no partition is kept: it writes table sales, and only a write "
        "to a path keeps its committed partitions",
    )


def test_progress_carries_over_attempts_of_the_same_shape_only(run):
    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0, 1).end(137, 9)
    run.start_attempt().started("w")
    write_started(run, "w", kept=[0, 1])
    committed_tasks(run, "w", 0, 1, records=0)  # the kept partitions' empty tasks
    committed_tasks(run, "w", 4).end(137, 9)
    state = run.state()
    assert state.stages["w"].committed_tasks == {0: (1, 100), 1: (1, 100), 4: (2, 100)}
    assert state.stages["w"].partitions == {"committed": 3, "total": 8}
    run.start_attempt().started("w")
    write_started(run, "w", shape="other")  # e.g. another maxPartitionBytes: nothing carries over
    committed_tasks(run, "w", 6).end(137, 9)
    assert run.state().stages["w"].committed_tasks == {6: (3, 100)}


def test_a_committed_write_has_no_partial_progress(run):
    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0).committed("w").end(0)
    stage = run.state().stages["w"]
    assert stage.partitions is None and stage.committed_tasks == {}


def test_evidence_comes_from_the_job_attempt_folder_and_the_kept_folder(tmp_path):
    out = str(tmp_path / "out")
    task_folder(out, 0)
    task_folder(out, 1, place=taskfiles.kept_dir(out))
    task_folder(out, 2, rows=False)  # an empty partition (Spark writes no file for it)
    os.makedirs(os.path.join(out, "_temporary", "0", "_temporary", "attempt_x_m_000003_0"))  # in flight
    folders = taskfiles.task_folders(out)
    assert sorted(folders) == [0, 1, 2]
    assert sorted(kept_partitions.usable(folders, empty_ok=set())) == [0, 1]
    assert sorted(kept_partitions.usable(folders, empty_ok={2})) == [0, 1, 2]


def test_doubtful_task_folders_are_not_kept(tmp_path):
    out = str(tmp_path / "out")
    task_folder(out, 0)
    task_folder(out, 0, write_uuid=str(uuid.UUID(int=8)), job="202611230302")  # two with data
    wrong = task_folder(out, 1)
    os.rename(
        os.path.join(wrong, f"part-00001-{UUID}-c000.snappy.parquet"),
        os.path.join(wrong, f"part-00009-{UUID}-c000.snappy.parquet"),
    )  # not its partition
    task_folder(out, 2)
    assert sorted(kept_partitions.usable(taskfiles.task_folders(out), empty_ok=set())) == [2]


def test_a_job_commit_that_had_begun_is_seen_by_its_files_in_the_target(tmp_path):
    out = str(tmp_path / "out")
    task_folder(out, 0)
    folder = task_folder(out, 1)
    name = f"part-00001-{UUID}-c000.snappy.parquet"
    assert not taskfiles.job_commit_began(out, taskfiles.task_folders(out))
    with open(os.path.join(out, "part-00000-11111111-2222-3333-4444-555555555555-c000.parquet"), "wb"):
        pass  # yesterday's output, another write: not a sign
    assert not taskfiles.job_commit_began(out, taskfiles.task_folders(out))
    os.rename(os.path.join(folder, name), os.path.join(out, name))  # mergePaths had moved it
    assert taskfiles.job_commit_began(out, taskfiles.task_folders(out))


def test_inspect_and_replay_show_progress_inside_a_write(run, cli, tmp_path):
    import orjson

    run.started("w")
    write_started(run, "w")
    committed_tasks(run, "w", 0, 1, 2).end(137, 9)
    root = os.path.dirname(run.dir)
    code, out, _err = cli("inspect", "r1", "--root", root)
    assert code == 0
    assert "w: 3/8 partitions committed before it stopped (resume keeps those whose files survive)" in out
    code, out, _ = cli("inspect", "r1", "--root", root, "--json")
    (stage,) = orjson.loads(out)["stages"]
    assert stage["partitions"] == {"committed": 3, "total": 8, "by_attempt": {"1": 3}}
    code, out, _ = cli("replay", "r1", "--root", root)
    assert "write.started" in out and "8 partitions" in out
    assert "partition 2 (task attempt 0), 100 rows" in out


def test_a_post_shuffle_write_hands_its_partition_specs_to_the_driver(run):
    """The driver compares the specs adaptive execution chose with the resumed attempt's."""
    run.started("w")
    write_started(run, "w", specs="aqe1")
    committed_tasks(run, "w", 0, 3).end(137, 9)
    for partition in (0, 3):
        task_folder(run.outputs["w"], partition)
    decision = decision_of(run)
    assert decision.decision == "continue" and decision.tasks.specs == "aqe1"


def test_an_attempt_that_fell_back_keeps_its_own_tasks_for_the_next_resume(run):
    """Attempt 2 kept nothing (other specs than attempt 1's), but its partitions are reusable:
    what it committed before dying is kept by attempt 3."""
    run.started("w")
    write_started(run, "w", specs="aqe1")
    committed_tasks(run, "w", 0, 1).end(137, 9)
    run.start_attempt().started("w")
    reason = "the post-shuffle partitions differ from the attempt that committed them"
    write_started(run, "w", partitions=4, shape="s2", reason=reason, specs="aqe2")
    committed_tasks(run, "w", 2).end(137, 9)
    task_folder(run.outputs["w"], 2, job="202611230302")
    decision = decision_of(run)
    assert decision.decision == "continue", decision.reason
    assert decision.tasks.kept == [2] and decision.tasks.specs == "aqe2"


def test_pendingsets_are_read_below_the_target_and_set_aside(tmp_path):
    out = str(tmp_path / "out")
    pendingset(out, 0)
    pendingset(out, 1, place=taskfiles.kept_dir(out))
    pendingset(out, 2, files=[])  # a task that wrote no rows
    pendingset(
        out, 3, files=[f"continent=EU/part-00003-{WRITE}.c000.json", f"continent=US/part-00003-{WRITE}.c000.json"]
    )
    os.makedirs(os.path.join(out, "__magic_job-other"))  # Hadoop 3.4's layout of a job folder
    pendingset(out, 4, place=os.path.join(out, "__magic_job-other"), job="other")
    found = tasklists.pendingsets(out)
    assert sorted(found) == [0, 1, 2, 3, 4]
    assert found[0][0].files == [(f"part-00000-{WRITE}.c000.json", 10)] and found[0][0].job == "job-uuid"
    assert found[0][0].uploads == [(f"{out.strip('/')}/part-00000-{WRITE}.c000.json", "upload-0-0")]
    assert len(found[3][0].files) == 2 and found[4][0].job == "other"
    assert sorted(kept_partitions.usable(found, empty_ok=set())) == [0, 1, 3, 4]
    assert sorted(kept_partitions.usable(found, empty_ok={2})) == [0, 1, 2, 3, 4]
    assert not taskfiles.job_commit_began(out, found)
    with open(os.path.join(out, f"part-00000-{WRITE}.c000.json"), "w") as handle:  # a commit had begun
        handle.write("{}")
    assert taskfiles.job_commit_began(out, found)


def test_doubtful_pendingsets_are_not_kept(tmp_path):
    out = str(tmp_path / "out")
    pendingset(out, 0, files=[f"part-00001-{WRITE}.c000.json"])  # another partition's file
    pendingset(out, 1, files=[f"part-00001-{WRITE}.c000.json", f"part-00001-{uuid.uuid4()}.c000.json"])
    pendingset(out, 2)
    with open(pendingset(out, 3), "w") as handle:
        handle.write("{not json")
    pendingset(out, 4)
    pendingset(out, 4, place=taskfiles.kept_dir(out))  # a set-aside cut short: in both places
    found = tasklists.pendingsets(out)
    assert "does not belong to partition 0" in found[0][0].problem
    assert "2 writes" in found[1][0].problem and "readable" in found[3][0].problem
    assert sorted(kept_partitions.usable(found, empty_ok=set())) == [2]
    # Outside the target (a pendingset of another folder's write).
    elsewhere = str(tmp_path / "elsewhere")
    pendingset(elsewhere, 5, place=os.path.join(out, "__magic", "job-x"))
    assert "not below the target" in tasklists.pendingsets(out)[5][0].problem


def test_a_pendingset_whose_uploads_are_gone_is_not_kept():
    tasks = {p: [taskfiles.TaskFolder(p, f"/t/task_{p}.pendingset", uploads=[(f"k{p}", f"u{p}")])] for p in range(3)}
    tasklists._check_uploads(tasks, {("k0", "u0"), ("k2", "u2"), ("k1", "another upload")})
    assert [tasks[p][0].problem is None for p in range(3)] == [True, False, True]
    assert "no longer all open" in tasks[1][0].problem
    tasklists._check_uploads(tasks, None)  # a store that cannot list them: nothing more is said


def test_task_manifests_are_read_with_their_files_checked(tmp_path):
    out = str(tmp_path / "out")
    manifest(out, 0)
    manifest(out, 1, sizes=(3, 4))
    manifest(out, 2, sizes=())  # a task that wrote no rows
    manifest(out, 3, write=False)  # its files are gone
    manifest(out, 4, names=[f"part-00005-{WRITE}.c000.parquet"])  # another partition's file
    with open(manifest(out, 5), "r+") as handle:
        handle.write("{damaged")
    manifest(out, 6)
    os.remove(next(iter(glob.glob(os.path.join(out, "_temporary", "*", "00", "tasks", "*_000006_0", "*")))))
    with open(
        os.path.join(
            out,
            "_temporary",
            "job-uuid",
            "00",
            "tasks",
            "attempt_202611270000_0001_m_000006_0",
            f"part-00006-{WRITE}-0.c000.parquet",
        ),
        "wb",
    ) as handle:
        handle.write(b"short")  # fmt: skip
    os.makedirs(os.path.join(out, "_temporary", "0", "task_x"))  # FileOutputCommitter's folder: not a job's
    found = tasklists.manifests(out)
    assert sorted(found) == [0, 1, 2, 3, 4, 5, 6]
    assert found[1][0].files == [(f"part-00001-{WRITE}-0.c000.parquet", 3), (f"part-00001-{WRITE}-1.c000.parquet", 4)]
    assert found[0][0].job == "job-uuid" and taskfiles.place_of(found[0][0]).endswith("/job-uuid/00/manifests")
    assert "missing or changed" in found[3][0].problem and "missing or changed" in found[6][0].problem
    assert "does not belong to partition 4" in found[4][0].problem and "readable" in found[5][0].problem
    assert sorted(kept_partitions.usable(found, empty_ok={2})) == [0, 1, 2]
    assert not taskfiles.job_commit_began(out, found)
    with open(os.path.join(out, f"part-00000-{WRITE}-0.c000.parquet"), "wb") as handle:
        handle.write(b"x" * 7)  # renamed by a job commit that had begun
    assert taskfiles.job_commit_began(out, found)


def test_a_resume_leaves_one_kept_manifest_a_partition_in_one_job_folder(tmp_path):
    """The manifest committer's job commit publishes every manifest in its folder: before a resumed
    write, only the kept partitions' manifests of one job folder stay (a kept partition of an
    attempt that died too has two there: the adopted one and its own empty task's)."""
    from sparkrecover.driver.tasks import taskresume

    out = str(tmp_path / "out")
    manifest(out, 0)
    manifest(out, 1)
    manifest(out, 2)
    empty = manifest(out, 1, sizes=()).replace("_0001_m_", "_0002_m_")  # another job's task, same folder
    os.rename(manifest(out, 1, sizes=()), empty)
    manifest(out, 1)  # written again over the empty one's name above: partition 1 has both
    manifest(out, 3, job="older-job")
    os.makedirs(os.path.join(out, "_temporary", "0", "_temporary"))
    taskresume.set_aside(out, continuing(0, 1))
    assert os.listdir(os.path.join(out, "_temporary")) == ["job-uuid"]
    kept = sorted(os.listdir(os.path.join(out, "_temporary", "job-uuid", "00", "manifests")))
    assert kept == [f"task_202611270000_0001_m_{p:06d}-manifest.json" for p in (0, 1)]
    assert sorted(kept_partitions.usable(tasklists.manifests(out), empty_ok=set())) == [0, 1]

    taskresume.set_aside(out, PlanEntry("w", Verdict.RUN, "-"))  # nothing kept
    assert not os.path.exists(os.path.join(out, "_temporary"))


def test_manifests_a_resume_had_adopted_are_kept_with_the_dead_jobs_files(tmp_path):
    """A resumed write moves the manifests it adopts into its own job's folder; their files stay in
    the dead job's. When that resume dies too, both folders are needed."""
    from sparkrecover.driver.tasks import taskresume

    out = str(tmp_path / "out")
    adopted = manifest(out, 4)  # written by the first job, in job-uuid
    second = os.path.join(out, "_temporary", "second-job", "00", "manifests")
    os.makedirs(second)
    os.rename(adopted, os.path.join(second, os.path.basename(adopted)))
    manifest(out, 5, job="second-job")
    manifest(out, 6, job="third-job")  # an attempt whose manifests are not kept
    found = tasklists.manifests(out)
    assert sorted(kept_partitions.usable(found, empty_ok=set())) == [4, 5, 6]
    assert tasklists.source_jobs(found[4][0]) == {"job-uuid"}
    taskresume.set_aside(out, continuing(4, 5))
    assert sorted(os.listdir(os.path.join(out, "_temporary"))) == ["job-uuid", "second-job"]
    assert sorted(kept_partitions.usable(tasklists.manifests(out), empty_ok=set())) == [4, 5]


def test_pendingsets_are_kept_in_place_only_when_nothing_else_could_be_committed(tmp_path):
    """The magic committer's job commit loads every pendingset in its UUID's folder: a resumed write
    keeps the dead job's only when its folder holds the kept ones and nothing else (a set-aside
    cut short by an error leaves others: then nothing is kept, and the write runs under a UUID of
    its own)."""
    from sparkrecover.driver.tasks import committers, magic_committer, partitions, taskresume

    out = str(tmp_path / "out")
    for partition in (0, 1, 2):
        pendingset(out, partition)
    shape = partitions.WriteShape(4, True, None, digest="d")
    tasks = KeptTasks(kept=[0, 1], partitions=4, shape="d")
    target = taskresume.Target(None, None, out, "file://" + out, "overwrite", "json")

    def keep() -> taskresume.TaskPlan:
        plan = taskresume.TaskPlan(shape, None, kind=partitions.PENDINGSETS)
        write = committers.ResumedWrite(target.url, target.mode, tasks, taskfiles.kept_dir(out))
        taskresume._keep(plan, magic_committer.MagicCommitter(write))
        return plan

    refused = keep()  # partition 2 committed but not journaled: its pendingset is still there
    assert refused.kept == [] and "could not all be cleared" in refused.reason and refused.in_place
    os.remove(next(p for p in glob.glob(f"{out}/__magic/*/*.pendingset") if p.endswith("_m_000002.pendingset")))
    kept = keep()
    assert (kept.kept, kept.kept_job, kept.in_place) == ([0, 1], "job-uuid", True)
    assert kept.kept_dir == "file://" + os.path.join(out, "__magic", "job-job-uuid")
    os.makedirs(os.path.join(out, "__magic_job-another"))  # another job's folder: not kept either
    assert keep().kept == []


def continuing(*kept: int) -> PlanEntry:
    """A plan's ``continue`` of a write that keeps these partitions."""
    return PlanEntry("w", Verdict.CONTINUE, "-", tasks=KeptTasks(kept=list(kept), partitions=8, shape="s1"))


def test_the_plan_keeps_what_the_driver_keeps_of_pendingsets_and_manifests(tmp_path):
    """`resume --dry-run` asks the driver's rule (kept_partitions.adopt): of the partitions the journal
    says committed, pendingsets of one S3A job only (a write commits under one UUID), manifests of
    one job folder only (the one holding most of them)."""
    from types import SimpleNamespace

    out = str(tmp_path / "out")
    tasks = {p: [taskfiles.TaskFolder(p, f"/x/{p}.pendingset", job="a" if p < 2 else "b")] for p in range(3)}
    assert kept_partitions.choose(CommitKind.PENDINGSETS, tasks, {0, 1, 2}, {0, 1, 2}) == {}
    assert kept_partitions.choose(CommitKind.PENDINGSETS, tasks, {0, 1}, {0, 1, 2}) == {0: tasks[0][0], 1: tasks[1][0]}
    manifest(out, 0)
    manifest(out, 1)
    manifest(out, 2, job="other-job")  # a crash inside a resumed write's adoption split them

    def kept_by_the_plan(*journaled: int) -> tuple[set[int], str | None]:
        stage = SimpleNamespace(
            outputs=[out],
            committed_tasks={p: (1, 100) for p in journaled},
            write_progress=SimpleNamespace(unfinished={p: (1, 100) for p in journaled}),
        )
        return StorageEvidence(str(tmp_path / "run")).committed_partitions(stage)

    assert kept_by_the_plan(0, 1, 2) == ({0, 1}, None)
    assert kept_by_the_plan(1, 2) == ({1}, None)  # a tie: the first job folder by name
    assert kept_by_the_plan(2) == ({2}, None)  # the folder holding most of what the journal agrees on


def foreach_started(run, stage="f", reusable=True, reason=None):
    """A foreachPartition stage's start, as driver/recording/foreach.py journals it: no output, nothing to verify."""
    run.driver.emit(
        "stage.started",
        stage=stage,
        kind="foreach",
        outputs=[],
        upstream=[],
        fingerprint={"version": None},
        mode="foreachPartition",
        target="RDD",
        verifiable=False,
    )
    run.driver.emit(
        "write.started", stage=stage, partitions=8, shape="s1", reusable=reusable, reason=reason, kept=[], staging=None
    )
    return run


def test_a_killed_foreach_continues_with_the_partitions_the_journal_says_finished(run):
    """A side effect leaves no files of ours: the journal's finished tasks alone are kept (a record
    lost only makes a finished partition run again)."""
    foreach_started(run)
    committed_tasks(run, "f", 0, 1, 2, 5, records=0).end(137, 9)
    decision = decision_of(run, "f")
    assert (decision.decision, decision.reason) == ("continue", "4/8 partitions kept (finished in attempt 1)")
    assert decision.partitions == PartitionCount(kept=4, total=8)
    assert decision.tasks is not None and decision.tasks.kept == [0, 1, 2, 5] and decision.tasks.shape == "s1"


def test_inspect_says_a_foreach_s_partitions_finished_and_the_others_run(run, cli, tmp_path):
    foreach_started(run)
    committed_tasks(run, "f", 0, 1, 2, records=0).end(137, 9)
    code, out, _err = cli("inspect", "r1", "--root", os.path.dirname(run.dir))
    assert code == 0
    assert "f: 3/8 partitions finished before it stopped (resume runs only the others)" in out


def test_a_foreach_whose_partitions_may_differ_runs_whole_and_the_plan_says_why(run):
    foreach_started(run, reusable=False, reason="its RDD is INDETERMINATE in Spark's terms")
    committed_tasks(run, "f", 0, 1, records=0).end(137, 9)
    decision = decision_of(run, "f")
    assert (decision.decision, decision.reason) == (
        "run",
        "started in attempt 1 but not committed; no partition is kept: its RDD is INDETERMINATE in Spark's terms",
    )


def test_a_finished_foreach_is_skipped_with_nothing_to_verify(run):
    foreach_started(run)
    committed_tasks(run, "f", *range(8), records=0)
    run.committed("f").end(0)
    decision = decision_of(run, "f")
    assert (decision.decision, decision.reason) == ("skip", "committed in attempt 1")
