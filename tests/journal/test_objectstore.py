"""The journal on object stores: local disk, memory:// and S3 (a moto server) through one code path.

Rolling and compaction bound the object count; storage failures back off, cap memory, never
raise, and a commit record that was lost makes its stage unfinished, never committed.
"""

from __future__ import annotations

import threading
import time
import uuid

import fsspec
import orjson
import pytest

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import planner
from sparkrecover.errors import JournalError
from sparkrecover.journal import JournalWriter, events, read_journal
from sparkrecover.journal.pending import Dropped, enforce_cap
from sparkrecover.journal.segments import list_segments, segment_url
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run
from tests.helpers import memory_run_dir


@pytest.fixture(params=["local", "memory", "s3"])
def run_dir(request, tmp_path):
    """A run directory on each kind of storage the journal supports."""
    if request.param == "local":
        yield str(tmp_path / "root" / "r1")
    elif request.param == "memory":
        with memory_run_dir() as memory:
            yield memory
    else:
        yield request.getfixturevalue("s3").prefix + "/r1"


@pytest.fixture
def memory_dir():
    with memory_run_dir() as run_dir:
        yield run_dir


def writer_at(run_dir, attempt=1, writer="driver", **options) -> JournalWriter:
    options.setdefault("flush_interval", 0)
    return JournalWriter(Run("r1", run_dir), attempt, writer, **options)


class FailingSink:
    """Wraps a sink: raises while ``down`` is set, counting the calls that reached it."""

    def __init__(self, sink, delay: float = 0.0):
        self.sink, self.delay, self.down, self.calls = sink, delay, True, 0

    def write(self, data, durable):
        self.calls += 1
        if self.down:
            time.sleep(self.delay)
            raise ConnectionError("endpoint unreachable")
        return self.sink.write(data, durable)

    def close(self, compact=True):
        return self.sink.close(compact)


def stage_events(journal: JournalWriter, name: str) -> None:
    journal.emit(events.STAGE_STARTED, stage=name, kind="stage", outputs=[], upstream=[])
    journal.emit(events.STAGE_COMMITTED, stage=name, manifest=[], upstream=[])


class NothingLost:
    """Evidence that every output survives (these tests are about the journal, not the outputs)."""

    def verify(self, stage):
        return []

    def committed_partitions(self, stage):
        return set(), "no task folders here"

    def stat(self, url):
        raise FileNotFoundError(url)


def plan_of(run_dir: str) -> dict[str, tuple[str, str]]:
    state = RunState.from_events("r1", read_journal(run_dir))
    decisions = planner.make_plan(state, NothingLost())
    return {d.stage: (d.decision, d.reason) for d in decisions}


# -- one code path for every root ----------------------------------------------------------------


def test_every_root_writes_reads_and_plans_the_same(run_dir):
    cli = writer_at(run_dir, writer="cli")
    cli.emit(events.RUN_STARTED, app="etl.py")
    driver = writer_at(run_dir, segment_bytes=600)
    stage_events(driver, "orders")
    driver.emit(events.STAGE_STARTED, stage="clean", kind="checkpoint", outputs=[], upstream=["orders"])
    for job in range(20):
        driver.emit(events.SPARK_JOB_STARTED, stage="clean", job=job)
    driver.close()
    cli.emit(events.ATTEMPT_ENDED, exit_code=137, signal=9)
    cli.close()
    records = read_journal(run_dir)
    assert [r["seq"] for r in records if r["writer"] == "driver"] == list(range(23))
    assert [s.name for s in list_segments(run_dir)][-1] == "0001-driver-000000.jsonl" or storage.is_local(run_dir)
    assert plan_of(run_dir) == {
        "orders": ("skip", "committed in attempt 1, output verified"),
        "clean": ("run", "started in attempt 1 but not committed"),
    }


def test_object_segments_roll_by_size_and_compact_into_one_at_close(run_dir):
    if storage.is_local(run_dir):
        pytest.skip("local segments append; they roll at 64 MiB and need no compaction")
    journal = writer_at(run_dir, buffer_size=1, segment_bytes=1000)
    records = [journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i, pad="x" * 50) for i in range(60)]
    total = sum(len(orjson.dumps(r)) + 1 for r in records)
    segments = list_segments(run_dir)
    assert 1 < len(segments) <= total // 1000 + 1  # the documented bound, with no age roll
    assert read_journal(run_dir) == records
    journal.close()
    assert [s.index for s in list_segments(run_dir)] == [0]
    assert read_journal(run_dir) == records


def test_object_segments_roll_by_age(memory_dir):
    journal = writer_at(memory_dir, buffer_size=1, segment_bytes=1 << 20, segment_age=0.05)
    records = []
    for i in range(4):
        records.append(journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i))
        time.sleep(0.06)
    assert [s.index for s in list_segments(memory_dir)] == [0, 1, 2, 3]
    assert read_journal(memory_dir) == records
    journal.close()
    assert read_journal(memory_dir) == records


def test_a_reader_during_compaction_sees_every_record_once(memory_dir):
    journal = writer_at(memory_dir, buffer_size=1, segment_bytes=300)
    records = [journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i) for i in range(12)]
    parts = list_segments(memory_dir)
    assert len(parts) > 2
    fs = fsspec.filesystem("memory")
    whole = b"".join(fs.cat_file(p.url) for p in parts)
    fs.pipe_file(parts[0].url, whole)  # compaction uploaded segment 0, deleted nothing yet
    assert read_journal(memory_dir) == records
    fs.rm_file(parts[1].url)  # ... and deleted some parts
    assert read_journal(memory_dir) == records


def test_a_segment_that_vanishes_while_reading_is_read_again(memory_dir, monkeypatch):
    journal = writer_at(memory_dir, buffer_size=1, segment_bytes=300)
    records = [journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i) for i in range(12)]
    from sparkrecover.journal import reader

    real_read, calls = storage.read_bytes, []

    def compacting_read(url):
        calls.append(url)
        if len(calls) == 2:  # a compaction lands between the listing and the second read
            journal.close()
        return real_read(url)

    monkeypatch.setattr(reader.storage, "read_bytes", compacting_read)
    assert read_journal(memory_dir) == records
    assert [s.index for s in list_segments(memory_dir)] == [0]


# -- storage failures ------------------------------------------------------------------------------


def test_retries_back_off_instead_of_hitting_storage_on_every_flush(memory_dir):
    journal = writer_at(memory_dir, buffer_size=1, retry_initial=0.2, retry_max=0.4, close_timeout=2)
    sink = journal._sink = FailingSink(journal._sink)
    for i in range(50):  # 50 would-be flushes within the first backoff window
        journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i)
    assert sink.calls == 1 and journal.degraded
    time.sleep(0.25)
    journal.emit(events.SPARK_JOB_STARTED, stage="s", job=50)
    assert sink.calls == 2  # backoff over: one retry, which fails and doubles the wait
    journal.emit(events.SPARK_JOB_STARTED, stage="s", job=51)
    assert sink.calls == 2
    sink.down = False
    journal.close()
    read = read_journal(memory_dir)
    assert [r.get("job") for r in read[:-1]] == list(range(52))
    assert read[-1]["type"] == events.JOURNAL_DEGRADED and "endpoint unreachable" in read[-1]["error"]


def test_the_application_never_waits_on_failing_storage(memory_dir):
    journal = writer_at(memory_dir, flush_interval=0.05, retry_initial=0.05, retry_max=0.1, close_timeout=3)
    sink = journal._sink = FailingSink(journal._sink, delay=0.5)  # a slow, dead endpoint
    journal.emit(events.STAGE_STARTED, stage="a")  # the first failure is paid inline, once
    for _ in range(20):
        journal.emit(events.STAGE_COMMITTED, stage="a")  # urgent, yet nobody waits on storage
        journal.flush()
    assert journal.degraded and 1 <= sink.calls < 20  # the 20 urgent flushes did not each call storage
    sink.down = False
    time.sleep(0.8)  # the flusher thread gets through once storage answers
    assert not journal.degraded
    journal.close()
    types = [r["type"] for r in read_journal(memory_dir)]
    assert types.count(events.STAGE_COMMITTED) == 20 and types[-1] == events.JOURNAL_DEGRADED


def test_storage_that_never_comes_back_is_warned_about_and_never_raises(memory_dir, capsys):
    journal = writer_at(memory_dir, close_timeout=0.3)
    journal._sink = FailingSink(journal._sink)
    journal.emit(events.STAGE_COMMITTED, stage="a")
    journal.close()
    assert "still failing when the writer closed" in journal.warnings[-1]
    assert "still failing" in capsys.readouterr().err
    assert list_segments(memory_dir) == []


def test_the_memory_cap_drops_telemetry_before_pipeline_events(memory_dir):
    journal = writer_at(memory_dir, max_pending_bytes=4000, close_timeout=1)
    sink = journal._sink = FailingSink(journal._sink)
    journal.emit(events.STAGE_STARTED, stage="a", kind="stage", outputs=[], upstream=[])
    for job in range(200):
        journal.emit(events.SPARK_JOB_STARTED, stage="a", job=job)
    journal.emit(events.STAGE_COMMITTED, stage="a", manifest=[], upstream=[])
    assert len(journal._buffer) <= 4000
    sink.down = False
    journal.close()
    read = read_journal(memory_dir)
    gap = read[-1]
    assert gap["type"] == events.JOURNAL_DEGRADED
    assert gap["dropped_events"] > 100 and gap["dropped_stages"] == []
    assert [r["type"] for r in read if r["type"].startswith("stage.")] == ["stage.started", "stage.committed"]
    assert plan_of(memory_dir)["a"][0] == "skip"


def test_a_commit_dropped_under_the_cap_leaves_its_stage_unfinished(memory_dir):
    journal = writer_at(memory_dir, max_pending_bytes=600, close_timeout=1)
    sink = journal._sink = FailingSink(journal._sink)
    stage_events(journal, "orders")  # both records are dropped while storage is down
    for name in ("clean", "daily"):
        journal.emit(events.STAGE_STARTED, stage=name, kind="stage", outputs=[], upstream=[], pad="x" * 150)
    sink.down = False
    journal.close()
    read = read_journal(memory_dir)
    assert "orders" not in [r.get("stage") for r in read if r["type"] != events.JOURNAL_DEGRADED]
    assert read[-1]["dropped_stages"][0] == "orders"
    plan = plan_of(memory_dir)
    assert plan["orders"] == (
        "run",
        "its journal records of attempt 1 were lost while the journal's storage was failing",
    )


def test_a_lost_commit_overrides_an_earlier_commit_of_the_same_stage(memory_dir):
    first = writer_at(memory_dir, attempt=1)
    stage_events(first, "orders")
    first.close()
    assert plan_of(memory_dir)["orders"][0] == "skip"
    second = writer_at(memory_dir, attempt=2, max_pending_bytes=300, close_timeout=1)
    sink = second._sink = FailingSink(second._sink)
    stage_events(second, "orders")  # the rerun's started and committed are both dropped
    second.emit(events.STAGE_STARTED, stage="clean", pad="x" * 250)
    sink.down = False
    second.close()
    assert plan_of(memory_dir)["orders"][0] == "run"  # never "skip" on attempt 1's word


def test_enforce_cap_keeps_whole_lines_and_counts_what_it_dropped():
    lines = [
        orjson.dumps({"v": 1, "type": t, "stage": s}) + b"\n"
        for t, s in [
            ("stage.started", "a"),
            ("spark.job.started", "a"),
            ("stage.committed", "a"),
            ("spark.job.ended", "a"),
            ("stage.started", "b"),
        ]
    ]
    buffer, dropped = bytearray(b"".join(lines)), Dropped()
    enforce_cap(buffer, len(buffer) - 1, dropped)
    assert bytes(buffer) == lines[0] + lines[2] + lines[4]
    assert (dropped.events, dropped.stages) == (2, [])
    enforce_cap(buffer, 10, dropped)
    assert bytes(buffer) == b""
    assert dropped.events == 5 and dropped.stages == ["a", "b"]


# -- reading -----------------------------------------------------------------------------------------


def test_a_newer_schema_on_an_object_store_is_refused_naming_both_versions(memory_dir):
    record = {
        "v": events.SCHEMA_VERSION + 1,
        "type": "stage.started",
        "run": "r1",
        "attempt": 1,
        "writer": "driver",
        "seq": 0,
        "ts": "2026-01-01T00:00:00.000Z",
    }
    fsspec.filesystem("memory").pipe_file(segment_url(memory_dir, 1, "driver", 0), orjson.dumps(record) + b"\n")
    with pytest.raises(JournalError) as raised:
        read_journal(memory_dir)
    assert f"v{events.SCHEMA_VERSION + 1}" in str(raised.value)
    assert f"reads v{events.SCHEMA_VERSION}" in str(raised.value)


def test_an_attempt_can_be_read_alone(memory_dir):
    for attempt in (1, 2):
        journal = writer_at(memory_dir, attempt=attempt)
        stage_events(journal, f"s{attempt}")
        journal.close()
    assert {r["attempt"] for r in read_journal(memory_dir, attempt=2)} == {2}


class ThreadNotingSink:
    """Wraps a sink, noting which thread made each write."""

    def __init__(self, sink):
        self.sink, self.threads = sink, []

    def write(self, data, durable):
        self.threads.append(threading.current_thread().name)
        return self.sink.write(data, durable)

    def close(self, compact=True):
        return self.sink.close(compact)


def test_full_buffers_are_uploaded_by_the_flusher_and_nothing_is_lost(run_dir):
    journal = writer_at(run_dir, buffer_size=2000, backlog_size=8000, segment_bytes=20_000, flush_interval=30)
    sink = journal._sink = ThreadNotingSink(journal._sink)
    records = [journal.emit(events.SPARK_JOB_STARTED, stage="s", job=i) for i in range(1000)]
    journal.append(events.SPARK_JOB_ENDED, {"stage": "s", "job": 1000})
    committed = journal.emit(events.STAGE_COMMITTED, stage="s", manifest=[], upstream=[])
    assert sink.threads[-1] == "MainThread"  # a commit is on storage before emit returns
    journal.close()
    assert len(sink.threads) > 10  # ~130 kB of events in buffers of 2 kB
    assert set(sink.threads[:-1]) == {"sparkrecover-journal-flush"}  # every full buffer
    read = read_journal(run_dir)
    assert read[:1000] == records and read[1001] == committed
    assert read[1000]["type"] == events.SPARK_JOB_ENDED and read[1000]["seq"] == 1000


def test_concurrent_emitters_keep_one_order_per_writer(memory_dir):
    journal = writer_at(memory_dir, buffer_size=512, segment_bytes=4096, flush_interval=0.01)

    def spin(name):
        for i in range(200):
            journal.emit(events.SPARK_JOB_STARTED, stage=name, job=i)

    threads = [threading.Thread(target=spin, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal.close()
    read = read_journal(memory_dir)
    assert [r["seq"] for r in read] == list(range(800))
    for name in ("t0", "t1", "t2", "t3"):
        assert [r["job"] for r in read if r["stage"] == name] == list(range(200))


# -- property tests: truncated and damaged object segments ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PROPERTIES = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
kinds = st.sampled_from([events.STAGE_STARTED, events.STAGE_COMMITTED, events.SPARK_JOB_STARTED, "custom.x"])
items = st.lists(st.tuples(kinds, st.text(max_size=30)), min_size=1, max_size=30)


def write_memory(run_dir: str, entries, segment_bytes: int, compact: bool) -> list[dict]:
    journal = writer_at(run_dir, buffer_size=1, segment_bytes=segment_bytes)
    records = [journal.emit(kind, stage=text) for kind, text in entries]
    if compact:
        journal.close()
    return records


@PROPERTIES
@given(entries=items, segment_bytes=st.integers(100, 2000), compact=st.booleans(), data=st.data())
def test_truncating_the_last_object_never_loses_an_earlier_complete_record(entries, segment_bytes, compact, data):
    run_dir = f"memory://prop-{uuid.uuid4().hex}/r1"
    records = write_memory(run_dir, entries, segment_bytes, compact)
    fs = fsspec.filesystem("memory")
    last = list_segments(run_dir)[-1].url
    content = fs.cat_file(last)
    cut = data.draw(st.integers(0, len(content)), label="cut")
    fs.pipe_file(last, content[:cut])
    whole_lines = content[:cut].count(b"\n")
    earlier = len(records) - content.count(b"\n")
    try:
        read = read_journal(run_dir)
    finally:
        fs.rm(run_dir.rsplit("/", 1)[0], recursive=True)
    # every record of earlier segments, every whole line of the cut one, at most one unterminated
    # but complete record more, in order
    assert read[: earlier + whole_lines] == records[: earlier + whole_lines]
    assert len(read) - (earlier + whole_lines) in (0, 1)
    assert read == records[: len(read)]


@PROPERTIES
@given(entries=items, segment_bytes=st.integers(100, 2000), data=st.data())
def test_damaged_object_segments_raise_nothing_but_journal_error(entries, segment_bytes, data):
    run_dir = f"memory://prop-{uuid.uuid4().hex}/r1"
    records = write_memory(run_dir, entries, segment_bytes, compact=False)
    fs = fsspec.filesystem("memory")
    segments = list_segments(run_dir)
    index = data.draw(st.integers(0, len(segments) - 1), label="segment")
    victim = segments[index].url
    before = sum(fs.cat_file(segment.url).count(b"\n") for segment in segments[:index])
    content = bytearray(fs.cat_file(victim))
    start = data.draw(st.integers(0, len(content)), label="start")
    garbage = data.draw(st.binary(max_size=40), label="garbage")
    content[start : start + len(garbage)] = garbage
    fs.pipe_file(victim, bytes(content))
    try:
        read = read_journal(run_dir, warn=lambda message: None)
    except JournalError:
        return  # refused, as damage should be: the property is that nothing else is raised
    finally:
        fs.rm(run_dir.rsplit("/", 1)[0], recursive=True)
    # Read without an error: the segments before the damaged one come back whole and first, and
    # every record read is one a reader accepts.
    assert read[:before] == records[:before]
    assert all(events.record_problem(record, record["attempt"], record["writer"]) is None for record in read)
