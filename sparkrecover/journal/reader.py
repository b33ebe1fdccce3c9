"""Reads a run's journal back: every segment, checked, merged into one ordered event list.

A torn last line of a segment (a writer killed mid-write) is dropped with a warning; any other
malformed line is corruption and raises ``JournalError`` naming the file and line.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Any, Callable, Iterable

import orjson

from sparkrecover import events, storage
from sparkrecover.errors import JournalError
from sparkrecover.journal.segments import Segment, list_segments

Warn = Callable[[str], None]


def _check_envelope(record: Any, where: str, segment: Segment) -> None:
    if not isinstance(record, dict):
        raise JournalError(f"{where}: not a JSON object")
    version = record.get("v")
    if isinstance(version, int) and version > events.SCHEMA_VERSION:
        raise JournalError(
            f"{where}: written in journal format v{version}; this sparkrecover reads "
            f"v{events.SCHEMA_VERSION}: upgrade sparkrecover to read it"
        )
    for key in events.ENVELOPE_KEYS:
        if key not in record:
            raise JournalError(f"{where}: missing envelope field {key!r}")
    if version != events.SCHEMA_VERSION:
        raise JournalError(f"{where}: unknown journal format version {version!r}")
    if not isinstance(record["type"], str) or not isinstance(record["seq"], int):
        raise JournalError(f"{where}: malformed envelope")
    if record["attempt"] != segment.attempt or record["writer"] != segment.writer:
        raise JournalError(f"{where}: record of attempt {record['attempt']!r}/{record['writer']!r} "
                           f"in a segment of attempt {segment.attempt}/{segment.writer}")


def parse_segment(data: bytes, segment: Segment, warn: Warn | None = None,
                  first_line: int = 1) -> list[dict[str, Any]]:
    """The records of one segment file, in file order. ``first_line`` numbers the first line of
    ``data`` when it is the rest of a segment read before (``inspect --follow``)."""
    lines = data.split(b"\n")
    unterminated = lines.pop()  # b"" when the file ends with a newline
    records = []
    for number, line in enumerate(lines, start=first_line):
        where = f"{segment.url}:{number}"
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise JournalError(f"{where}: malformed journal line") from None
        _check_envelope(record, where, segment)
        records.append(record)
    if unterminated:
        where = f"{segment.url}:{len(lines) + first_line}"
        try:
            record = orjson.loads(unterminated)
        except orjson.JSONDecodeError:
            if warn:
                warn(f"{where}: dropped a torn last line ({len(unterminated)} bytes; the writer "
                     "stopped mid-write)")
        else:
            _check_envelope(record, where, segment)
            records.append(record)
    return records


def read_segments(segments: Iterable[Segment], warn: Warn | None = None) -> list[dict[str, Any]]:
    """Merge segments into one list ordered by attempt, then time, each writer in its own order."""
    streams: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for segment in segments:
        stream = streams[(segment.attempt, segment.writer)]
        for record in parse_segment(storage.read_bytes(segment.url), segment, warn):
            # A writer that retried after a failed write may have left a record twice.
            if not stream or record["seq"] > stream[-1]["seq"]:
                stream.append(record)
    # Within an attempt the CLI and driver streams interleave by timestamp; on a tie the driver's
    # event goes first (the CLI only writes attempt.ended after the driver has gone).
    ordered = sorted(streams.items(), key=lambda item: (item[0][0], item[0][1] != events.WRITER_DRIVER))
    merged = heapq.merge(*(records for _, records in ordered), key=lambda r: (r["attempt"], r["ts"]))
    return list(merged)


def read_journal(run_dir: str, warn: Warn | None = None) -> list[dict[str, Any]]:
    return read_segments(list_segments(run_dir), warn)
