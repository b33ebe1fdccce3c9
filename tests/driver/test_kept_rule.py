"""What `resume --dry-run` promises a resumed write keeps is what the driver keeps, for every kind
and mixture of committed-task evidence (docs/task-resume.md): task folders in the job attempt folder
and set aside, pendingsets of one or several S3A jobs, manifests of one or several job folders, a
dead job commit that had begun or not, a journal that agrees with part of it.

Real folders on a local disk, a real journal, the real planner and the real driver steps
(``taskresume.prepare``); only the write's Spark probes (its committer, its partitions' shape) are
replaced by the answers Spark would give, since no Spark is needed to decide what is kept. An object
store is the same folder with the object store's two rules switched on: the magic committer's
pendingsets are read, and an overwrite or append keeps its tasks where the dead job left them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import ExitStack
from unittest import mock

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.tasks import partitions, taskresume
from sparkrecover.kinds import Verdict
from sparkrecover.planning.next_attempt import plan_resume
from sparkrecover.rundir import taskfiles, tasklists
from tests.journals import Run
from tests.task_evidence import manifest, pendingset, task_folder

PARTITIONS = 6
SHAPE = "shape-of-the-write"
SCRIPT = "digest-of-the-script"
# The write's shape as the driver journals it: the probe's digest salted with the script's.
JOURNALED_SHAPE = hashlib.sha256(f"{SHAPE}\n{SCRIPT}".encode()).hexdigest()[:32]
# One write per committer: each kind's files carry its own write UUID.
WRITES = {
    partitions.FOLDERS: "00000000-0000-0000-0000-00000000000f",
    partitions.PENDINGSETS: "00000000-0000-0000-0000-00000000000a",
    partitions.MANIFESTS: "00000000-0000-0000-0000-00000000000c",
}

# One piece of evidence of one partition: (kind, where, what it holds).
folder_pieces = st.tuples(
    st.just(partitions.FOLDERS), st.sampled_from(["job", "aside"]), st.sampled_from(["rows", "empty", "doubtful"])
)
pendingset_pieces = st.tuples(
    st.just(partitions.PENDINGSETS),
    st.sampled_from(["job-a", "job-b", "aside"]),
    st.sampled_from(["rows", "empty", "doubtful"]),
)
manifest_pieces = st.tuples(
    st.just(partitions.MANIFESTS), st.sampled_from(["job-x", "job-y"]), st.sampled_from(["rows", "empty", "doubtful"])
)
evidence = st.dictionaries(
    st.integers(0, PARTITIONS - 1),
    st.lists(st.one_of(folder_pieces, pendingset_pieces, manifest_pieces), min_size=1, max_size=3),
    max_size=PARTITIONS,
)


def lay(out: str, partition: int, piece: tuple[str, str, str], taken: set[str]) -> None:
    """Write one piece of evidence below the target ``out`` (or set aside beside it)."""
    kind, where, holds = piece
    write = WRITES[kind]
    aside = taskfiles.kept_dir(out)
    if kind == partitions.FOLDERS:
        place = aside if where == "aside" else None
        key = f"{kind}-{where}-{partition}"
        if key in taken:  # one folder of a name in one place
            return
        folder = task_folder(out, partition, write_uuid=write, rows=holds != "empty", place=place)
        if holds == "doubtful":  # a file of another partition
            open(os.path.join(folder, f"part-{partition + 1:05d}-{write}-c000.snappy.parquet"), "wb").close()
    elif kind == partitions.PENDINGSETS:
        job = where.removeprefix("job-") if where != "aside" else "a"
        place = aside if where == "aside" else None
        names = [] if holds == "empty" else [f"part-{partition + (holds == 'doubtful'):05d}-{write}.c000.json"]
        pendingset(out, partition, place=place, job=job, files=names, write_uuid=write)
    else:
        job = where.removeprefix("job-")
        sizes = () if holds == "empty" else (7,)
        manifest(out, partition, job=job, sizes=sizes, write=holds != "doubtful", write_uuid=write)
    taken.add(f"{kind}-{where}-{partition}")


def adopted_kind(pieces: dict[int, list[tuple[str, str, str]]], object_store: bool) -> str:
    """The committer a resumed write over this evidence commits through: the one that left it (the
    magic committer's pendingsets, else the manifest committer's manifests, else task folders; a
    mixture is what a committer changed between attempts, or a cleanup cut short, leaves)."""
    kinds = {kind for found in pieces.values() for kind, _, _ in found}
    if object_store and partitions.PENDINGSETS in kinds:
        return partitions.PENDINGSETS
    return partitions.MANIFESTS if partitions.MANIFESTS in kinds else partitions.FOLDERS


def resume(
    pieces: dict[int, list[tuple[str, str, str]]],
    journal: dict[int, int],
    began: str | None,
    object_store: bool,
    mode: str,
    committer: str,
) -> tuple[list[int], taskresume.TaskPlan]:
    """A write killed with this evidence below its target and these partitions' commits journaled
    (partition: rows), then resumed under ``committer``: what `resume --dry-run` promises it keeps,
    and what the driver's steps keep."""
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as patches:
        if object_store:
            patches.enter_context(mock.patch.object(tasklists, "on_s3", lambda url: True))
            patches.enter_context(
                mock.patch.object(taskfiles, "keeps_in_place", lambda url, mode: mode in ("overwrite", "append"))
            )
        run = Run(os.path.join(tmp, "root")).start_attempt()
        run.started("w")
        out = run.outputs["w"]
        os.makedirs(out)
        run.driver.emit(
            "write.started", stage="w", partitions=PARTITIONS, shape=JOURNALED_SHAPE, reusable=True, kept=[]
        )
        for partition, records in sorted(journal.items()):
            run.driver.emit(
                "task.committed", stage="w", partition=partition, task_attempt=0, spark_job=1, spark_stage=2,
                records=records, bytes=10,
            )  # fmt: skip
        run.end(137, 9)
        taken: set[str] = set()
        for partition, found in sorted(pieces.items()):
            for piece in found:
                lay(out, partition, piece, taken)
        if began is not None:  # the dead job commit had moved a file of that write into the target
            open(os.path.join(out, f"part-00000-{WRITES[began]}-c000.snappy.parquet"), "wb").close()

        (entry,) = [d for d in plan_resume(run.state(), run.ref, 2).decisions if d.stage == "w"]
        promised = entry.tasks.kept if entry.decision == Verdict.CONTINUE and entry.tasks else []

        patches.enter_context(mock.patch.object(taskresume, "_committer", lambda target: (committer, None)))
        patches.enter_context(
            mock.patch.object(
                partitions, "shape_of", lambda frame: partitions.WriteShape(PARTITIONS, True, None, digest=SHAPE)
            )
        )
        patches.enter_context(mock.patch.object(staleness, "script_digest", lambda *args: SCRIPT))
        target = taskresume.Target(None, None, out, "file://" + out, mode, "json")
        plan = taskresume.prepare(target, entry)
        assert plan is not None
        return promised, plan


journals = st.dictionaries(st.integers(0, PARTITIONS - 1), st.sampled_from([100, 0]), max_size=PARTITIONS)
modes = st.sampled_from(["overwrite", "append", "errorifexists"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=evidence, journal=journals, began=st.sampled_from([None, *WRITES]), object_store=st.booleans(), mode=modes
)
def test_the_dry_run_promises_the_partitions_the_driver_keeps(pieces, journal, began, object_store, mode):
    committer = adopted_kind(pieces, object_store)
    if committer == partitions.MANIFESTS and mode == "errorifexists":
        mode = "overwrite"  # the manifest committer keeps nothing for a write that needs no target: said by the driver
    promised, plan = resume(pieces, journal, began, object_store, mode, committer)
    assert plan.kept == promised, plan.reason


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=evidence,
    journal=journals,
    object_store=st.booleans(),
    mode=st.sampled_from(["overwrite", "append"]),
    committer=st.sampled_from(list(WRITES)),
)
def test_a_write_under_another_committer_keeps_nothing_of_the_evidence(pieces, journal, object_store, mode, committer):
    """The dry run cannot know the resumed write's committer: it promises what the committer that
    left the evidence would keep. A write whose settings changed to another committer keeps nothing,
    and says why: what it would find of its own kind was never checked against the journal."""
    assume(committer != adopted_kind(pieces, object_store))
    assume(object_store or committer != partitions.PENDINGSETS)  # the magic committer writes to S3 only
    _, plan = resume(pieces, journal, None, object_store, mode, committer)
    assert plan.kept == [], plan
