"""The fast journal reader and fold against the plain definitions they replace.

``iter_journal`` streams and merges each attempt's CLI events into its driver stream in one loop;
``RunState.apply_all`` tallies Spark telemetry instead of calling a handler per event. Both must
give exactly what the simple versions give, for any journal: sorted or not, ties or not.
"""

from __future__ import annotations

import heapq
import os
import tempfile

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.errors import JournalError
from sparkrecover.journal import events as ev
from sparkrecover.journal.reader import iter_journal, read_journal
from sparkrecover.journal.segments import list_segments, segment_url

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TYPES = [
    ev.RUN_STARTED,
    ev.ATTEMPT_STARTED,
    ev.ATTEMPT_ENDED,
    ev.DRIVER_STARTED,
    ev.DRIVER_ENDED,
    ev.STAGE_STARTED,
    ev.STAGE_COMMITTED,
    ev.STAGE_FAILED,
    ev.STAGE_SKIPPED,
    ev.SPARK_JOB_STARTED,
    ev.SPARK_JOB_ENDED,
    ev.SPARK_STAGE_COMPLETED,
    ev.SPARK_EVENTS_DROPPED,
    "custom.new",
]
stamps = st.integers(min_value=0, max_value=30).map(lambda s: f"2026-01-01T00:00:{s:02d}.000Z")
stage_names = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
events = st.tuples(
    st.sampled_from(TYPES),
    stamps,
    stage_names,
    st.integers(min_value=0, max_value=9),
    st.integers(min_value=0, max_value=2),
)
# (attempt, writer) -> events, each stream written as one or more segments
streams = st.dictionaries(
    st.tuples(st.integers(min_value=1, max_value=3), st.sampled_from(["cli", "driver"])),
    st.tuples(st.lists(events, max_size=25), st.integers(min_value=1, max_value=4)),
    min_size=1,
    max_size=6,
)


def record(attempt, writer, seq, item) -> dict:
    kind, ts, stage, tasks, failed = item
    if kind.startswith("stage.") and stage is None:
        stage = "a"  # stage.* events always name their stage
    payload = {"stage": stage} if stage is not None or kind.startswith("spark.") else {}
    if kind == ev.SPARK_STAGE_COMPLETED:
        payload.update(spark_stage=seq, tasks=tasks, failed_tasks=failed)
    if kind == ev.ATTEMPT_ENDED:
        payload.update(exit_code=tasks, signal=None)
    return {"v": 1, "type": kind, "run": "r", "attempt": attempt, "writer": writer, "seq": seq, "ts": ts, **payload}


def write(run_dir: str, layout: dict) -> dict:
    written = {}
    for (attempt, writer), (items, pieces) in layout.items():
        records = [record(attempt, writer, seq, item) for seq, item in enumerate(items)]
        written[(attempt, writer)] = records
        size = max(1, -(-len(records) // pieces))
        for index, start in enumerate(range(0, max(len(records), 1), size)):
            path = segment_url(run_dir, attempt, writer, index)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(b"".join(orjson.dumps(r) + b"\n" for r in records[start : start + size]))
    return written


def reference_order(written: dict) -> list[dict]:
    """The original definition: heapq.merge of every stream by (attempt, ts), driver first."""
    ordered = sorted(written.items(), key=lambda item: (item[0][0], item[0][1] != "driver"))
    return list(heapq.merge(*(records for _, records in ordered), key=lambda r: (r["attempt"], r["ts"])))


@SETTINGS
@given(layout=streams)
def test_the_streaming_merge_gives_the_original_order(layout):
    with tempfile.TemporaryDirectory() as run_dir:
        written = write(run_dir, layout)
        assert read_journal(run_dir) == reference_order(written)
        assert list(iter_journal(run_dir)) == reference_order(written)


def apply_one_by_one(records: list[dict]) -> RunState:
    state = RunState("r")
    for item in records:
        state.apply(item)
    return state


@SETTINGS
@given(layout=streams)
def test_the_tallying_fold_equals_applying_each_event(layout):
    with tempfile.TemporaryDirectory() as run_dir:
        records = reference_order(write(run_dir, layout))
    expected, folded = apply_one_by_one(records), RunState.from_events("r", iter(records))
    assert folded == expected
    assert list(folded.stages) == list(expected.stages)  # pipeline order too


def test_folding_in_pieces_equals_folding_at_once():
    records = [
        record(1, "driver", seq, (kind, f"2026-01-01T00:00:{seq:02d}.000Z", "a", 2, 1))
        for seq, kind in enumerate(
            [
                ev.STAGE_STARTED,
                ev.SPARK_JOB_STARTED,
                ev.SPARK_STAGE_COMPLETED,
                ev.STAGE_COMMITTED,
                ev.SPARK_STAGE_COMPLETED,
            ]
        )
    ]
    whole = RunState.from_events("r", records)
    pieces = RunState("r")
    pieces.apply_all(records[:2])
    pieces.apply_all(records[2:])
    assert pieces == whole
    assert (whole.stages["a"].spark_jobs, whole.stages["a"].tasks, whole.stages["a"].failed_tasks) == (1, 4, 2)


@pytest.mark.parametrize(
    "line, message",
    [
        (b'{"v":1,"type":"x","run":"r","attempt":1,"writer":"driver","seq":0}', "missing envelope field 'ts'"),
        (b'{"v":1,"type":"x","run":"r","attempt":2,"writer":"driver","seq":0,"ts":"t"}', "record of attempt 2"),
        (
            b'{"v":1,"type":"x","run":"r","attempt":1,"writer":"cli","seq":0,"ts":"t"}',
            "record of attempt 1/cli in a segment of attempt 1/driver",
        ),
        (
            b'{"v":1,"type":7,"run":"r","attempt":1,"writer":"driver","seq":0,"ts":"t"}',
            "envelope field 'type' is not a str",
        ),
        (
            b'{"v":1,"type":"x","run":"r","attempt":1,"writer":"driver","seq":"0","ts":"t"}',
            "envelope field 'seq' is not a int",
        ),
        (
            b'{"v":1,"type":"stage.committed","run":"r","attempt":1,"writer":"driver","seq":0,"ts":"t"}',
            "stage.committed event without 'stage'",
        ),
        (b'{"v":2,"type":"x","run":"r","attempt":1,"writer":"driver","seq":0,"ts":"t"}', "journal format v2"),
        (b"[1, 2]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b'{"v":1,"type":"x"', "malformed journal line"),
    ],
)
def test_a_bad_line_in_the_middle_is_refused_with_file_and_line(tmp_path, line, message):
    good = [
        orjson.dumps(record(1, "driver", seq, ("custom.new", "2026-01-01T00:00:00.000Z", None, 0, 0)))
        for seq in range(3)
    ]
    path = segment_url(str(tmp_path), 1, "driver", 0)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write(b"\n".join([good[0], good[1], line, good[2]]) + b"\n")
    with pytest.raises(JournalError) as raised:
        read_journal(str(tmp_path))
    assert f"{path}:3: " in str(raised.value) and message in str(raised.value)


def test_streaming_keeps_one_line_at_a_time(tmp_path):
    """A consumer that stops early leaves the rest unread: the reader never loads a whole stream."""
    path = segment_url(str(tmp_path), 1, "driver", 0)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write(orjson.dumps(record(1, "driver", 0, ("custom.new", "t", None, 0, 0))) + b"\n")
        handle.write(b"not json at all\n")
    stream = iter_journal(str(tmp_path))
    assert next(stream)["seq"] == 0
    with pytest.raises(JournalError):
        next(stream)
    assert [s.index for s in list_segments(str(tmp_path))] == [0]
