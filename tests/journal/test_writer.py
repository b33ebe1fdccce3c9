"""JournalWriter: envelopes, buffering and flushes, segments, storage failures and backpressure
(docs/design.md §4 rules 1 and 7)."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime, timezone

import fsspec
import pytest

from sparkrecover.journal import JournalWriter, read_journal
from sparkrecover.journal.segments import list_segments
from sparkrecover.rundir.runs import Run
from tests.helpers import memory_run_dir
from tests.journals import line_of, segment_path

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def writer_at(run_dir, writer="driver", attempt=1, **options) -> JournalWriter:
    options.setdefault("flush_interval", 0)  # no timer thread unless a test asks for one
    return JournalWriter(Run("r1", str(run_dir)), attempt, writer, **options)


def on_disk(path) -> bytes:
    if not os.path.exists(path):
        return b""
    with open(path, "rb") as handle:
        return handle.read()


# -- writing --------------------------------------------------------------------------------------


def test_envelope_fields_and_payload(tmp_path):
    journal = writer_at(tmp_path, "driver", attempt=3)
    before = datetime.now(timezone.utc).replace(microsecond=0)
    first = journal.emit("stage.started", stage="clean", upstream=["raw"])
    second = journal.emit("spark.job.started", stage="clean", job=4)
    journal.close()
    assert list(first)[:7] == ["v", "type", "run", "attempt", "writer", "seq", "ts"]
    assert {k: first[k] for k in ("v", "type", "run", "attempt", "writer", "seq")} == {
        "v": 1,
        "type": "stage.started",
        "run": "r1",
        "attempt": 3,
        "writer": "driver",
        "seq": 0,
    }
    assert (first["stage"], first["upstream"]) == ("clean", ["raw"])
    assert (second["seq"], second["job"]) == (1, 4)
    for record in (first, second):
        assert TS.match(record["ts"]), record["ts"]
        stamp = datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
        assert stamp.utcoffset().total_seconds() == 0
        assert stamp >= before
    assert on_disk(segment_path(tmp_path, 3)) == line_of(first) + line_of(second)
    assert read_journal(str(tmp_path)) == [first, second]


def test_payload_keys_named_like_emits_parameters_are_plain_fields(tmp_path):
    # Found by the emit/append property test in CI: a payload key "self" or "event_type"
    # collided with emit's own parameters and raised TypeError instead of being journaled.
    journal = writer_at(tmp_path, "driver")
    record = journal.emit("stage.started", self="me", event_type="mine", stage="clean")
    journal.close()
    assert (record["type"], record["self"], record["event_type"]) == ("stage.started", "me", "mine")
    assert read_journal(str(tmp_path)) == [record]


def test_seq_counts_from_zero_per_writer_and_attempt(tmp_path):
    writers = [writer_at(tmp_path, "cli", 1), writer_at(tmp_path, "driver", 1), writer_at(tmp_path, "driver", 2)]
    for journal in writers:
        journal.emit("a")
        journal.emit("b")
    for journal in writers:
        journal.close()
    seqs = {(r["attempt"], r["writer"], r["type"]): r["seq"] for r in read_journal(str(tmp_path))}
    assert seqs == {
        (1, "cli", "a"): 0,
        (1, "cli", "b"): 1,
        (1, "driver", "a"): 0,
        (1, "driver", "b"): 1,
        (2, "driver", "a"): 0,
        (2, "driver", "b"): 1,
    }


def test_segment_file_names(tmp_path):
    for writer, attempt in (("cli", 1), ("driver", 1), ("driver", 12)):
        journal = writer_at(tmp_path, writer, attempt)
        journal.emit("x")
        journal.close()
    assert sorted(os.listdir(tmp_path / "journal")) == [
        "0001-cli-000000.jsonl",
        "0001-driver-000000.jsonl",
        "0012-driver-000000.jsonl",
    ]


def test_unknown_writer_is_refused(tmp_path):
    with pytest.raises(ValueError):
        writer_at(tmp_path, "executor")


def test_nothing_on_disk_until_the_buffer_fills_or_a_flush(tmp_path):
    journal = writer_at(tmp_path, buffer_size=10_000)
    records = [journal.emit("spark.job.started", stage="s", job=i) for i in range(5)]
    assert on_disk(segment_path(tmp_path)) == b""
    assert journal.flush() is True
    assert on_disk(segment_path(tmp_path)) == b"".join(line_of(r) for r in records)
    journal.close()


def test_flushes_when_the_buffer_reaches_buffer_size(tmp_path):
    journal = writer_at(tmp_path, buffer_size=300)
    written, pending = b"", b""
    for i in range(12):
        pending += line_of(journal.emit("spark.job.started", stage="s", job=i))
        if len(pending) >= 300:
            written, pending = written + pending, b""
        assert on_disk(segment_path(tmp_path)) == written, f"after event {i}"
    assert written  # the buffer filled at least once
    journal.close()


@pytest.mark.parametrize("urgent", ["stage.committed", "driver.ended", "attempt.ended"])
def test_urgent_events_flush_at_once(tmp_path, urgent):
    journal = writer_at(tmp_path, buffer_size=1 << 20)
    buffered = journal.emit("spark.stage.completed", stage="s", spark_stage=0)
    assert on_disk(segment_path(tmp_path)) == b""
    flushed = journal.emit(urgent, stage="s")
    assert on_disk(segment_path(tmp_path)) == line_of(buffered) + line_of(flushed)
    journal.close()


def test_flush_interval_writes_without_any_flush_call(tmp_path):
    journal = writer_at(tmp_path, buffer_size=1 << 20, flush_interval=0.05)
    try:
        record = journal.emit("spark.job.started", stage="s", job=0)
        deadline = time.monotonic() + 30
        while on_disk(segment_path(tmp_path)) != line_of(record) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert on_disk(segment_path(tmp_path)) == line_of(record)
    finally:
        journal.close()


def test_close_flushes_and_later_emits_are_not_written(tmp_path):
    journal = writer_at(tmp_path, buffer_size=1 << 20)
    kept = journal.emit("spark.job.started", stage="s", job=0)
    journal.close()
    journal.emit("spark.job.started", stage="late", job=1)
    journal.close()
    assert read_journal(str(tmp_path)) == [kept]


def test_segments_roll_over_at_segment_bytes(tmp_path):
    journal = writer_at(tmp_path, buffer_size=1, segment_bytes=300)
    records = [journal.emit("spark.job.started", stage="s", job=i) for i in range(30)]
    journal.close()
    names = sorted(os.listdir(tmp_path / "journal"))
    assert len(names) > 3
    assert names == [f"0001-driver-{i:06d}.jsonl" for i in range(len(names))]
    sizes = [os.path.getsize(tmp_path / "journal" / name) for name in names]
    assert all(size >= 300 for size in sizes[:-1])
    assert all(size < 300 + len(line_of(records[0])) + 5 for size in sizes)
    assert read_journal(str(tmp_path)) == records


@pytest.fixture
def memory_run():
    with memory_run_dir() as run_dir:
        yield run_dir


def test_memory_root_rewrites_whole_segment_objects_and_reads_back(memory_run):
    fs = fsspec.filesystem("memory")
    journal = JournalWriter(Run("r1", memory_run), 1, "driver", buffer_size=1, flush_interval=0, segment_bytes=400)
    records, content, index = [], b"", 0
    for i in range(12):
        record = journal.emit("spark.job.started", stage="s", job=i)
        records.append(record)
        content += line_of(record)
        # every flush rewrites the current object with all of its lines so far
        assert fs.cat_file(f"{memory_run}/journal/0001-driver-{index:06d}.jsonl") == content
        if len(content) >= 400:
            index, content = index + 1, b""
    assert index >= 2  # it rolled over to new objects
    assert [s.index for s in list_segments(memory_run)] == list(range(index + (1 if content else 0)))
    assert read_journal(memory_run) == records
    journal.close()  # a clean close compacts the attempt's segments into one object
    assert [s.index for s in list_segments(memory_run)] == [0]
    assert read_journal(memory_run) == records


# -- storage failures (rule 7) ----------------------------------------------------------------------


def test_failing_storage_never_raises_and_records_journal_degraded(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "journal").write_bytes(b"")  # a file where the journal folder must go: writes fail
    journal = writer_at(run_dir, buffer_size=1)
    during = [
        journal.emit("stage.started", stage="a"),
        journal.emit("stage.committed", stage="a"),
        journal.emit("driver.ended", exit_code=0),
    ]
    assert journal.flush() is False
    assert journal.degraded
    assert len(journal.warnings) == 1 and "journal storage failed" in journal.warnings[0]
    assert "warning" in capsys.readouterr().err
    (run_dir / "journal").unlink()  # storage comes back
    after = journal.emit("attempt.ended", exit_code=0)
    journal.close()
    read = read_journal(str(run_dir))
    assert read[:4] == [*during, after]
    assert [r["type"] for r in read] == [
        "stage.started",
        "stage.committed",
        "driver.ended",
        "attempt.ended",
        "journal.degraded",
    ]
    degraded = read[4]
    assert degraded["seq"] == 4 and degraded["dropped_bytes"] == 0
    assert TS.match(degraded["since"]) and TS.match(degraded["until"]) and degraded["since"] <= degraded["until"]
    assert degraded["error"].split(":")[0] in ("FileExistsError", "NotADirectoryError")
    assert not journal.degraded


def test_sink_raising_a_few_times_loses_nothing(tmp_path):
    journal = writer_at(tmp_path, buffer_size=1)
    real_write, failures = journal._sink.write, []

    def flaky(data, durable):
        if len(failures) < 3:
            failures.append(data)
            raise OSError(28, "No space left on device")
        return real_write(data, durable)

    journal._sink.write = flaky
    records = [journal.emit("stage.started", stage="a")]
    records += [journal.emit("spark.job.started", stage="a", job=i) for i in range(3)]
    journal.close()
    read = read_journal(str(tmp_path))
    assert len(failures) == 3
    assert read[:4] == records
    assert [r["type"] for r in read[4:]] == ["journal.degraded"]
    assert "No space left on device" in read[4]["error"]


def test_a_write_that_fails_half_way_keeps_every_record_once(tmp_path, monkeypatch):
    from sparkrecover.journal import sinks

    journal = writer_at(tmp_path, buffer_size=1 << 20)
    records = [journal.emit("spark.job.started", stage="a", job=i) for i in range(6)]
    journal.flush()
    records += [journal.emit("spark.job.started", stage="a", job=i) for i in range(6, 12)]
    real_write, failed = os.write, []

    def torn_write(fd, data):
        if not failed:  # the first write lands half-way, then the disk is full
            failed.append(True)
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(sinks.os, "write", torn_write)
    assert journal.flush() is False
    journal.close()
    warnings: list[str] = []
    read = read_journal(str(tmp_path), warnings.append)
    assert [r["type"] for r in read[-1:]] == ["journal.degraded"]
    assert read[:-1] == records
    assert warnings == []


# -- a full buffer goes to the flusher thread; backpressure -------------------------------------------


class GatedSink:
    """Wraps a sink: each write waits for ``gate`` (a slow upload), noting which thread wrote."""

    def __init__(self, sink):
        self.sink, self.gate, self.threads, self.started = sink, threading.Event(), [], threading.Event()

    def write(self, data, durable):
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return self.sink.write(data, durable)

    def close(self, compact=True):
        return self.sink.close(compact)


def fill(journal, count, start=0):
    return [journal.emit("spark.job.started", stage="s", job=i) for i in range(start, start + count)]


def test_a_full_buffer_is_written_by_the_flusher_not_the_emitting_thread(tmp_path):
    journal = writer_at(tmp_path, buffer_size=200, backlog_size=1 << 20, flush_interval=60)
    sink = journal._sink = GatedSink(journal._sink)
    records = fill(journal, 5)  # past 200 bytes: handed over, and emit returned while the write waits
    assert sink.started.wait(30)
    assert sink.threads == ["sparkrecover-journal-flush"]
    records += fill(journal, 5, start=5)  # the application goes on meanwhile
    sink.gate.set()
    journal.close()
    assert read_journal(str(tmp_path)) == records


def test_emit_waits_for_a_slow_flusher_past_the_backlog_then_loses_nothing(tmp_path):
    journal = writer_at(tmp_path, buffer_size=200, backlog_size=1000, flush_interval=60)
    sink = journal._sink = GatedSink(journal._sink)
    records = fill(journal, 5)
    assert sink.started.wait(30)  # the flusher holds the first batch and waits at the gate
    waited: list[float] = []

    def emit_past_the_backlog():
        started = time.monotonic()
        records.extend(fill(journal, 30, start=5))  # ~2,000 bytes: more than the backlog
        waited.append(time.monotonic() - started)

    emitter = threading.Thread(target=emit_past_the_backlog)
    emitter.start()
    emitter.join(0.5)
    assert emitter.is_alive()  # backpressure: emit waits for the upload instead of buffering on
    sink.gate.set()
    emitter.join(30)
    assert waited and waited[0] >= 0.5
    journal.close()
    assert read_journal(str(tmp_path)) == records


def test_backpressure_gives_up_on_a_hung_upload(tmp_path, monkeypatch):
    from sparkrecover.journal import writer as writer_module

    monkeypatch.setattr(writer_module, "BACKPRESSURE_MAX_WAIT", 0.3)
    journal = writer_at(tmp_path, buffer_size=200, backlog_size=1000, flush_interval=60)
    sink = journal._sink = GatedSink(journal._sink)
    records = fill(journal, 5)
    assert sink.started.wait(30)
    started = time.monotonic()
    records += fill(journal, 200, start=5)  # one wait of 0.3 s, then no more until a write lands
    assert time.monotonic() - started < 10
    sink.gate.set()
    journal.close()
    assert read_journal(str(tmp_path)) == records


def test_no_backpressure_while_storage_is_failing(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "journal").write_bytes(b"")  # writes fail
    journal = writer_at(
        run_dir,
        buffer_size=200,
        backlog_size=1000,
        flush_interval=0.05,
        retry_initial=60,
        retry_max=60,
        close_timeout=0.5,
    )
    journal.emit("stage.started", stage="a")
    journal.flush(durable=False)  # fails at once: degraded, next retry in a minute
    assert journal.degraded
    started = time.monotonic()
    fill(journal, 500)  # far past the backlog: emit never waits on failing storage
    assert time.monotonic() - started < 5
    journal.close()
