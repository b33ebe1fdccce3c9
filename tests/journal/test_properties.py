"""Property tests of the journal: a torn or padded last segment never loses a complete record.

A writer killed mid-write leaves a prefix of its last segment on disk; the reader must return
every record whose line made it whole, in order, and drop the torn rest (docs/design.md §5).
"""

from __future__ import annotations

import os
import tempfile

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkrecover.errors import JournalError
from sparkrecover.journal import JournalWriter, events, read_journal
from sparkrecover.journal.segments import list_segments
from sparkrecover.rundir.runs import Run

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

event_types = st.sampled_from(
    ["stage.started", "stage.committed", "spark.job.started", "spark.stage.completed", "custom.event", "driver.ended"]
)
payloads = st.dictionaries(
    st.sampled_from(["stage", "name", "note", "count", "rows", "error"]),
    st.one_of(st.text(max_size=40), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    max_size=4,
)


_FILLER = {str: "s", int: 0, list: [], dict: {}}


def _readable(item: tuple[str, dict]) -> tuple[str, dict]:
    """Known events carry the payload fields readers require (a reader refuses a record without
    them: events.REQUIRED), a drawn value of another type replaced."""
    kind, payload = item
    for key, required in events.REQUIRED.get(kind, ()):
        value = payload.get(key)
        if not isinstance(value, required) or isinstance(value, bool):
            payload = {**payload, key: _FILLER[required]}
    return kind, payload


journals = st.lists(st.tuples(event_types, payloads).map(_readable), min_size=1, max_size=40)
layouts = st.tuples(
    st.integers(min_value=1, max_value=2000),  # buffer_size
    st.integers(min_value=80, max_value=3000),
)  # segment_bytes


def write(run_dir: str, items, layout) -> list[dict]:
    buffer_size, segment_bytes = layout
    journal = JournalWriter(
        Run("r1", run_dir), 1, "driver", buffer_size=buffer_size, flush_interval=0, segment_bytes=segment_bytes
    )
    records = [journal.emit(kind, **payload) for kind, payload in items]
    journal.close()
    return records


def last_segment(run_dir: str) -> str:
    return list_segments(run_dir)[-1].url


def records_of(data: bytes) -> list[dict]:
    return [orjson.loads(line) for line in data.split(b"\n") if line]


@SETTINGS
@given(items=journals, layout=layouts, data=st.data())
def test_truncating_the_last_segment_keeps_every_complete_line(items, layout, data):
    with tempfile.TemporaryDirectory() as run_dir:
        records = write(run_dir, items, layout)
        assert read_journal(run_dir) == records
        path = last_segment(run_dir)
        with open(path, "rb") as handle:
            content = handle.read()
        cut = data.draw(st.integers(min_value=0, max_value=len(content)), label="cut")
        with open(path, "wb") as handle:
            handle.write(content[:cut])

        earlier = len(records) - len(records_of(content))
        complete, _, rest = content[:cut].rpartition(b"\n")
        kept = records_of(complete)
        # a cut right before the newline leaves a whole record without its terminator: kept too
        full_lines = content[len(complete) + 1 if complete else 0 :].split(b"\n")
        if rest and rest == full_lines[0]:
            kept.append(orjson.loads(rest))
        warnings: list[str] = []
        assert read_journal(run_dir, warnings.append) == records[:earlier] + kept
        assert records[:earlier] + kept == records[: earlier + len(kept)]
        torn = bool(rest) and rest != full_lines[0]
        assert len(warnings) == (1 if torn else 0)


garbage = st.one_of(
    st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b),
    st.text(min_size=1, max_size=60).map(str.encode).filter(lambda b: b"\n" not in b),
    st.just(b'{"v":1,"type":"stage.started","run":"r1"'),
)


@SETTINGS
@given(items=journals, layout=layouts, tail=garbage)
def test_garbage_after_the_last_line_is_dropped(items, layout, tail):
    with tempfile.TemporaryDirectory() as run_dir:
        records = write(run_dir, items, layout)
        with open(last_segment(run_dir), "ab") as handle:
            handle.write(tail)
        try:
            orjson.loads(tail)
            valid_json = True  # "null" included: valid JSON, though not an object
        except orjson.JSONDecodeError:
            valid_json = False
        warnings: list[str] = []
        if not valid_json:
            assert read_journal(run_dir, warnings.append) == records
            assert len(warnings) == 1 and "torn" in warnings[0]
        else:
            # Valid JSON cannot be a torn prefix of a record (an object is only valid once whole),
            # so it is no torn write: the design calls any other malformed line corruption.
            try:
                read = read_journal(run_dir, warnings.append)
            except JournalError as error:
                assert f"{os.path.basename(last_segment(run_dir))}:" in str(error)
            else:  # only a whole, valid envelope of this segment may be accepted
                assert read == [*records, orjson.loads(tail)]


@SETTINGS
@given(items=journals, layout=layouts, seq=st.integers(min_value=1, max_value=10**6))
def test_a_whole_record_without_its_newline_is_kept(items, layout, seq):
    with tempfile.TemporaryDirectory() as run_dir:
        records = write(run_dir, items, layout)
        # A later seq: a repeated one is a retried write's duplicate, which readers drop.
        extra = {**records[-1], "seq": records[-1]["seq"] + seq, "type": "custom.tail"}
        with open(last_segment(run_dir), "ab") as handle:
            handle.write(orjson.dumps(extra))
        warnings: list[str] = []
        read = read_journal(run_dir, warnings.append)
        assert read[: len(records)] == records
        assert read[len(records) :] == [extra] and warnings == []


# -- append() and emit() write the same bytes --------------------------------------------------------

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(0, 9)), inner, max_size=4),
    ),
    max_leaves=12,
)
# Any key but the envelope's, which payloads must not repeat.
ENVELOPE = {"v", "type", "run", "attempt", "writer", "seq", "ts"}
payload_keys = st.text(max_size=12).filter(lambda key: key not in ENVELOPE)


class FixedClock(JournalWriter):
    """Both writers stamp the same time, so their lines can be compared byte for byte."""

    def _timestamp(self) -> str:
        return "2026-11-22T03:00:00.000Z"


@SETTINGS
@given(
    items=st.lists(
        st.tuples(event_types | st.text(max_size=20), st.dictionaries(payload_keys, json_values, max_size=6)).map(
            _readable
        ),
        min_size=1,
        max_size=20,
    ),
    run_id=st.text(min_size=1, max_size=12),
    attempt=st.integers(1, 10**6),
)
def test_append_writes_exactly_what_emit_writes(items, run_id, attempt):
    with tempfile.TemporaryDirectory() as emitted, tempfile.TemporaryDirectory() as appended:
        by_emit = FixedClock(Run(run_id, emitted), attempt, "driver", flush_interval=0)
        by_append = FixedClock(Run(run_id, appended), attempt, "driver", flush_interval=0)
        for kind, payload in items:
            by_emit.emit(kind, **payload)
            by_append.append(kind, dict(payload))
        by_emit.close()
        by_append.close()
        with open(last_segment(emitted), "rb") as one, open(last_segment(appended), "rb") as other:
            assert one.read() == other.read()
        assert len(read_journal(appended)) == len(items)


def test_drawn_payloads_carry_what_readers_require():
    """Every known event type drawn with an empty payload is made readable (a reader refuses a
    record without its required fields: the property tests above would fail on the draw)."""
    for kind in events.REQUIRED:
        kind, payload = _readable((kind, {}))
        assert events.payload_problem({"type": kind, **payload}) is None, kind
