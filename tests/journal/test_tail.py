"""The journal tail under inspect --follow: reads only what grew, keeps torn lines, survives rewrites."""

from __future__ import annotations

import os

import orjson

from sparkrecover.journal import JournalWriter
from sparkrecover.journal import tail as tails
from sparkrecover.rundir.runs import Run


def test_tail_reads_only_what_grew(tmp_path, monkeypatch):
    reads = []
    original = tails.read_from
    monkeypatch.setattr(
        tails, "read_from", lambda url, offset: reads.append((os.path.basename(url), offset)) or original(url, offset)
    )
    run_dir = str(tmp_path / "r1")
    writer = JournalWriter(Run("r1", run_dir), 1, "driver", flush_interval=0)
    tail = tails.JournalTail(run_dir)
    assert tail.poll() == [] and not tail.found_journal
    first = [writer.emit("a"), writer.emit("b")]
    writer.flush()
    assert tail.poll() == first
    assert tail.poll() == []  # nothing grew: nothing read
    size = os.path.getsize(os.path.join(run_dir, "journal", "0001-driver-000000.jsonl"))
    third = writer.emit("c")
    writer.flush()
    assert tail.poll() == [third]
    assert reads == [("0001-driver-000000.jsonl", 0), ("0001-driver-000000.jsonl", size)]


def test_tail_keeps_a_half_written_line_for_the_next_poll(tmp_path):
    run_dir = tmp_path / "r1"
    path = run_dir / "journal" / "0001-cli-000000.jsonl"
    path.parent.mkdir(parents=True)
    line = (
        orjson.dumps(
            {
                "v": 1,
                "type": "x",
                "run": "r1",
                "attempt": 1,
                "writer": "cli",
                "seq": 0,
                "ts": "2026-01-01T00:00:00.000Z",
            }
        )
        + b"\n"
    )
    path.write_bytes(line[:20])
    tail = tails.JournalTail(str(run_dir))
    assert tail.poll() == []
    path.write_bytes(line + line[:10])
    assert [r["seq"] for r in tail.poll()] == [0]
    assert tail.drain() == ([], [f"{path}:2: dropped a torn last line (10 bytes; the writer stopped mid-write)"])


def test_tail_rereads_a_rewritten_segment_without_repeating_events(tmp_path):
    run_dir = tmp_path / "r1"
    path = run_dir / "journal" / "0001-cli-000000.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        orjson.dumps(
            {
                "v": 1,
                "type": "x",
                "run": "r1",
                "attempt": 1,
                "writer": "cli",
                "seq": seq,
                "ts": f"2026-01-01T00:00:0{seq}.000Z",
                "payload": "." * (50 - 40 * seq),
            }
        )
        + b"\n"
        for seq in range(3)
    ]
    path.write_bytes(lines[0] + lines[1])
    tail = tails.JournalTail(str(run_dir))
    assert [r["seq"] for r in tail.poll()] == [0, 1]
    path.write_bytes(lines[1] + lines[2])  # rewritten shorter (say, compacted): read again from the start
    assert len(lines[1] + lines[2]) < len(lines[0] + lines[1])
    assert [r["seq"] for r in tail.poll()] == [2]
