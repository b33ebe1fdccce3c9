"""Kept shuffle map outputs in the fold and the plan: record and evidence must agree."""

from __future__ import annotations

import itertools

from sparkrecover.core.fold import kept_shuffles
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.core.views import timeline
from sparkrecover.journal import events as ev
from sparkrecover.rundir.plans import PartitionCount

_seq = itertools.count()


def record(event_type: str, attempt: int = 1, **payload) -> dict:
    return {
        "v": 1,
        "type": event_type,
        "run": "r",
        "attempt": attempt,
        "writer": "driver",
        "seq": next(_seq),
        "ts": "2026-11-23T00:00:00.000Z",
        **payload,
    }


def kept(index: int, identity: str = "abc", data: int = 100) -> dict:
    return {
        "map": index,
        "path": f"{identity}/map-{index}",
        "data_bytes": data,
        "index_bytes": 24,
        "records": 10,
        "row_bytes": 400,
    }


def registered(
    identity: str = "abc", attempt: int = 1, maps: int = 4, reused: int = 0, stage: str | None = "w", **extra
):
    return record(
        ev.SHUFFLE_REGISTERED,
        attempt,
        shuffle=identity,
        spark_shuffle=0,
        stage=stage,
        maps=maps,
        reduces=2,
        reused=reused,
        **extra,
    )


def committed(*maps: dict, identity: str = "abc", attempt: int = 1) -> dict:
    return record(ev.SHUFFLE_COMMITTED, attempt, shuffle=identity, spark_shuffle=0, stage="w", maps=list(maps))


def sizes_of(files: dict[str, int]):
    return lambda path: files.get(path)


def on_disk(*maps: dict) -> dict[str, int]:
    files = {}
    for entry in maps:
        files[f"{entry['path']}/data"] = entry["data_bytes"]
        files[f"{entry['path']}/index"] = entry["index_bytes"]
        files[f"{entry['path']}/meta"] = 60
    return files


def test_the_fold_keeps_the_union_of_every_attempts_kept_map_outputs():
    state = RunState.from_events(
        "r",
        [
            registered(),
            committed(kept(0), kept(1)),
            committed(kept(1)),  # a second attempt of map task 1 (speculation): once
            registered(attempt=2, reused=2),
            committed(kept(3), attempt=2),
        ],
    )
    (shuffle,) = state.shuffles.values()
    assert sorted(shuffle.kept) == [0, 1, 3] and shuffle.maps == 4
    assert (
        shuffle.reused == {1: 0, 2: 2}
        and kept_shuffles.describe(shuffle) == "3/4 map outputs kept, 2 reused by attempt 2"
    )


def test_only_map_outputs_whose_files_match_the_record_are_offered():
    maps = [kept(0), kept(1), kept(2), kept(3, data=0)]
    state = RunState.from_events("r", [registered(), committed(*maps)])
    files = on_disk(*maps)
    del files["abc/map-0/data"]  # deleted
    files["abc/map-1/data"] = 93  # truncated
    del files["abc/map-2/meta"]  # never renamed into place whole
    del files["abc/map-3/data"]  # an empty map output writes no data file: still intact
    (offer,) = kept_shuffles.reusable(state.shuffles, sizes_of(files))
    assert [entry.map for entry in offer.maps] == [3]


def test_a_map_output_whose_record_names_a_path_outside_the_keep_folder_is_never_offered():
    bad = {**kept(0), "path": "../../etc"}
    state = RunState.from_events("r", [registered(), committed(bad, kept(1))])
    files = on_disk(kept(1))
    files["../../etc/data"], files["../../etc/index"], files["../../etc/meta"] = 100, 24, 1
    (offer,) = kept_shuffles.reusable(state.shuffles, sizes_of(files))
    assert [entry.map for entry in offer.maps] == [1]


def test_a_record_missing_a_field_keeps_nothing_of_that_map_output():
    partial = {k: v for k, v in kept(0).items() if k != "data_bytes"}
    state = RunState.from_events("r", [registered(), committed(partial, kept(1))])
    assert sorted(state.shuffles["abc"].kept) == [1]


class NothingOnStorage:
    """Evidence of a run whose outputs are all intact and whose writes kept no partition."""

    def verify(self, stage):
        return []

    def committed_partitions(self, stage):
        return set(), None

    def stat(self, url):
        raise OSError(url)


def stage_started(name: str = "w") -> dict:
    return record(ev.STAGE_STARTED, stage=name, kind="write", outputs=[], upstream=[])


def test_the_plan_says_how_many_map_outputs_of_an_unfinished_stage_are_kept():
    maps = [kept(i) for i in range(3)]
    state = RunState.from_events("r", [stage_started(), registered(), committed(*maps)])
    decisions = planner.make_plan(state, NothingOnStorage())
    offered = planner.plan_shuffles(state, decisions, sizes_of(on_disk(*maps)))
    (decision,) = decisions
    assert decision.decision == "run" and decision.shuffle_maps == PartitionCount(kept=3, total=4)
    assert decision.reason == (
        "started in attempt 1 but not committed, 3/4 shuffle map outputs kept (shuffle abc (3/4 kept): 1 map task "
        "not finished, or not yet copied durably, when the attempt ended)"
    )
    assert decision.summary()["shuffle_maps"] == {"kept": 3, "total": 4}
    assert [len(entry.maps) for entry in offered] == [3]


def test_map_outputs_kept_before_their_stage_started_are_offered():
    """A write's map stages run in its probe, before its stage.started: a driver killed then leaves
    a stage only Spark's telemetry names, which the plan leaves out (it runs as one never reached),
    and the map outputs kept for it are offered all the same."""
    maps = [kept(i) for i in range(3)]
    probe = record(ev.SPARK_JOB_STARTED, stage="w", job=0)
    state = RunState.from_events("r", [probe, registered(), committed(*maps)])
    decisions = planner.make_plan(state, NothingOnStorage())
    assert decisions == []
    offered = planner.plan_shuffles(state, decisions, sizes_of(on_disk(*maps)))
    assert [len(entry.maps) for entry in offered] == [3]


def test_from_scratch_and_skipped_stages_offer_nothing():
    maps = [kept(i) for i in range(4)]
    events = [stage_started(), registered(), committed(*maps)]
    state = RunState.from_events("r", events)
    decisions = planner.make_plan(state, NothingOnStorage(), from_scratch=True)
    assert planner.plan_shuffles(state, decisions, sizes_of(on_disk(*maps)), from_scratch=True) == []
    done = record(ev.STAGE_COMMITTED, stage="w", manifest=[], duration_s=1.0)
    state = RunState.from_events("r", [*events, done])
    decisions = planner.make_plan(state, NothingOnStorage())
    assert decisions[0].decision == "skip"
    assert planner.plan_shuffles(state, decisions, sizes_of(on_disk(*maps))) == []
    assert decisions[0].shuffle_maps is None


def test_no_keep_folder_offers_nothing():
    state = RunState.from_events("r", [registered(stage=None), committed(kept(0))])
    assert planner.plan_shuffles(state, [], None) == []


def test_unsupported_shuffles_are_kept_for_the_views():
    state = RunState.from_events(
        "r", [record(ev.SHUFFLE_UNSUPPORTED, reason="the map stage is INDETERMINATE", stage="w", spark_shuffle=3)]
    )
    (unsupported,) = state.shuffles_unsupported
    assert unsupported.reason.endswith("INDETERMINATE") and unsupported.spark_shuffle == 3


def test_a_registration_without_its_map_count_is_corruption():
    broken = record(ev.SHUFFLE_REGISTERED, shuffle="abc", reduces=2)
    assert ev.payload_problem(broken) == "shuffle.registered event without 'maps'"


def test_an_edited_script_is_offered_no_map_output_and_the_plan_says_why():
    """The script is part of every shuffle's identity: after an edit no shuffle is planned again
    with the identity its map outputs were kept under, so the plan promises none of them."""
    maps = [kept(i) for i in range(4)]
    state = RunState.from_events("r", [stage_started(), registered(script="s-old"), committed(*maps)])
    decisions = planner.make_plan(state, NothingOnStorage())
    files = sizes_of(on_disk(*maps))
    assert planner.plan_shuffles(state, decisions, files, script="s-new") == []
    (decision,) = decisions
    assert decision.shuffle_maps == PartitionCount(kept=0, total=4)
    assert decision.reason == (
        "started in attempt 1 but not committed, no shuffle map output reusable: the script changed since they "
        "were kept (it is part of each shuffle's identity)"
    )
    decisions = planner.make_plan(state, NothingOnStorage())
    assert [len(k.maps) for k in planner.plan_shuffles(state, decisions, files, script="s-old")] == [4]


def test_a_range_shuffle_is_offered_only_with_its_kept_bounds_and_the_plan_says_why():
    """Map outputs partitioned by range are reusable only with the bounds they were partitioned by:
    without the bounds file the new application would sample others, so the plan promises none."""
    maps = [kept(i) for i in range(4)]
    state = RunState.from_events("r", [stage_started(), registered(bounds="b1", sampled_bounds="b1"), committed(*maps)])
    files = on_disk(*maps)
    decisions = planner.make_plan(state, NothingOnStorage())
    assert planner.plan_shuffles(state, decisions, sizes_of(files)) == []
    (decision,) = decisions
    assert decision.reason == (
        "started in attempt 1 but not committed, no shuffle map output reusable: the range bounds they were "
        "partitioned by are missing from the keep folder"
    )
    files["abc/bounds"] = 90
    decisions = planner.make_plan(state, NothingOnStorage())
    assert [len(k.maps) for k in planner.plan_shuffles(state, decisions, sizes_of(files))] == [4]


def test_progress_counts_what_the_journal_kept_or_what_the_plan_offers():
    state = RunState.from_events("r", [registered(), committed(kept(0), kept(1)), registered("def", maps=2)])
    assert kept_shuffles.progress(state.shuffles, "w") == (2, 6)
    (offer,) = kept_shuffles.reusable(state.shuffles, sizes_of(on_disk(kept(1))))
    assert kept_shuffles.progress(state.shuffles, "w", [offer]) == (1, 6)
    assert kept_shuffles.progress(state.shuffles, "other") == (0, 0)


def test_reuse_is_counted_from_the_registration_never_from_the_offer():
    """Attempt 2 planned the shuffle again under another identity (its map outputs were offered
    and not reused): nothing of it was kept in attempt 2, and nothing was saved."""
    state = RunState.from_events(
        "r",
        [
            registered(time_ms=1_000_000),
            committed(kept(0), kept(1), kept(2), kept(3)),
            registered("new", attempt=2),
            committed(kept(0, "new"), kept(1, "new"), attempt=2),
        ],
    )
    assert kept_shuffles.cells(state.shuffles["abc"]) is None  # attempt 2 never planned it again
    assert kept_shuffles.cells(state.shuffles["new"]) is None  # attempt 2 was its first
    assert kept_shuffles.reused_work(state.shuffles, 2) == []


def test_a_later_attempt_that_reused_some_shows_them_kept_and_saves_their_time():
    first = [record(ev.SHUFFLE_REGISTERED, 1, shuffle="abc", stage="w", maps=4, reduces=2, reused=0, time_ms=0)]
    first[0]["ts"] = "1970-01-01T00:00:00.000Z"
    done = committed(kept(0), kept(1), kept(2))
    done["ts"] = "1970-01-01T00:00:30.000Z"  # 30 s from registration to its last kept map output
    state = RunState.from_events("r", [*first, done, registered(attempt=2, reused=2), committed(kept(3), attempt=2)])
    latest, cells = kept_shuffles.cells(state.shuffles["abc"])
    assert latest == 2
    assert cells == [(0, "kept", 1), (1, "kept", 1), (2, "not finished", None), (3, "computed", 2)]
    assert kept_shuffles.reused_work(state.shuffles, 2) == [("w", 2, 20.0)]  # 2 of the 3 it computed


def test_a_followed_map_stage_shows_its_quarters_not_each_map_output():
    """inspect --follow on a pipe: one line per map output made hundreds of lines per shuffle."""
    state, shown, lines = RunState("r"), {}, []
    for entry in [registered(maps=8), *(committed(kept(i)) for i in range(8))]:
        state.apply(entry)
        lines += timeline.shuffle_milestones([entry], state.shuffles, shown)
    assert [timeline.fact(line) for line in lines] == [
        "shuffle abc: 8 map tasks, 0 kept outputs reused",
        "shuffle abc: 2/8 map outputs kept",
        "shuffle abc: 4/8 map outputs kept",
        "shuffle abc: 6/8 map outputs kept",
        "shuffle abc: 8/8 map outputs kept",
    ]


def test_replay_names_kept_map_outputs_by_index_not_as_a_count():
    assert timeline.fact(committed(kept(0))) == "shuffle abc: map output #0 kept (100 B)"
    assert timeline.fact(committed(kept(0), kept(3))) == "shuffle abc: map outputs #0, #3 kept (200 B)"


def test_replay_says_when_a_range_shuffle_partitions_by_kept_bounds_instead_of_its_sample():
    first = registered(maps=8, bounds="b1", sampled_bounds="b1")
    again = registered(attempt=2, maps=8, reused=8, bounds="b1", sampled_bounds="b2")
    assert timeline.fact(first) == "shuffle abc: 8 map tasks, 0 kept outputs reused"
    assert timeline.fact(again) == (
        "shuffle abc: 8 map tasks, 8 kept outputs reused, partitioned by the kept range bounds, not its own sample"
    )


# -- a map stage that ran more than once (an executor lost, a fetch failure) ---------------------


def copy_of(index: int, task: int, identity: str = "abc") -> dict:
    return {**kept(index, identity), "path": f"{identity}/map-{index}-t{task}"}


def test_a_map_stage_attempted_twice_offers_each_partitions_newest_whole_copy():
    """Spark ran map tasks 1 and 2 again in a second attempt of the map stage (their executor was
    lost): each map partition's copy, whichever attempt wrote it, is offered, and where the newest
    copy is not whole the older one is."""
    first = [copy_of(i, i) for i in range(4)]
    again = [copy_of(1, 11), copy_of(2, 12)]
    state = RunState.from_events("r", [stage_started(), registered(), committed(*first), committed(*again)])
    files = on_disk(*first, *again)
    del files["abc/map-2-t12/meta"]  # the second copy of map 2 never became whole
    decisions = planner.make_plan(state, NothingOnStorage())
    offer = planner.shuffle_offer(state, decisions, sizes_of(files))
    (shuffle,) = offer.shuffles
    assert [(m.map, m.path) for m in shuffle.maps] == [
        (0, "abc/map-0-t0"), (1, "abc/map-1-t11"), (2, "abc/map-2-t2"), (3, "abc/map-3-t3")
    ]  # fmt: skip
    assert offer.not_kept == [] and decisions[0].reason.endswith(", 4/4 shuffle map outputs kept")
    assert sorted(kept_shuffles.named_folders(state.shuffles)) == sorted(m["path"] for m in first + again)


def test_the_plan_says_per_shuffle_why_map_outputs_are_not_kept():
    """Two shuffles in a stage: one whose copies are gone, one refused (INDETERMINATE), one half
    finished: each says why, in the stage's reason and in the dry run's ``shuffles_not_kept``."""
    left = [copy_of(i, i) for i in range(4)]
    right = [copy_of(i, i, "def") for i in range(2)]
    indeterminate = record(ev.SHUFFLE_UNSUPPORTED, reason="the map stage is INDETERMINATE", stage="w", spark_shuffle=3)
    events = [stage_started(), registered(), registered("def", maps=4), committed(*left), indeterminate]
    events.append(record(ev.SHUFFLE_COMMITTED, shuffle="def", spark_shuffle=1, stage="w", maps=right))
    state = RunState.from_events("r", events)
    files = on_disk(*right)  # the left side's copies were removed
    decisions = planner.make_plan(state, NothingOnStorage())
    offer = planner.shuffle_offer(state, decisions, sizes_of(files))
    assert [(s.shuffle, len(s.maps)) for s in offer.shuffles] == [("def", 2)]
    planned = planner.StageDecisions("r", 2, decisions, shuffles=offer.shuffles, shuffles_not_kept=offer.not_kept)
    document = planner.dry_run_document(planned)
    assert document["shuffles_not_kept"] == [
        {"shuffle": "abc", "spark_shuffle": None, "stage": "w", "kept": 0, "total": 4,
         "reason": "4 kept map outputs missing or changed in the keep folder"},
        {"shuffle": "def", "spark_shuffle": None, "stage": "w", "kept": 2, "total": 4,
         "reason": "2 map tasks not finished, or not yet copied durably, when the attempt ended"},
        {"shuffle": None, "spark_shuffle": 3, "stage": "w", "kept": 0, "total": 0,
         "reason": "not kept: the map stage is INDETERMINATE"},
    ]  # fmt: skip
    assert decisions[0].reason == (
        "started in attempt 1 but not committed, 2/8 shuffle map outputs kept (shuffle abc (0/4 kept): 4 kept map "
        "outputs missing or changed in the keep folder; shuffle def (2/4 kept): 2 map tasks not finished, or not "
        "yet copied durably, when the attempt ended; Spark shuffle 3: not kept: the map stage is INDETERMINATE)"
    )
