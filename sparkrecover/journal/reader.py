"""Reads a run's journal back: every segment, checked, merged into one ordered event list.

A torn last line of a segment (a writer killed mid-write) is dropped with a warning; any other
malformed line is corruption and raises ``JournalError`` naming the file and line. A record seen
twice in one stream (the same writer, attempt and seq, byte for byte the same) is kept once: a
compaction between its upload and its deletes, or a write retried after a partial failure,
leaves such copies. Storage errors while reading are ``JournalError`` too (exit 3).
"""
from __future__ import annotations

import bisect
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
    if not isinstance(record["type"], str) or not isinstance(record["seq"], int) \
            or not isinstance(record["ts"], str):
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


def _add_stream(stream: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    """Append ``records`` to a stream, leaving out exact copies of records already in it."""
    for record in records:
        if stream and record["seq"] <= stream[-1]["seq"]:
            at = bisect.bisect_left(stream, record["seq"], key=lambda r: r["seq"])
            if at < len(stream) and stream[at] == record:
                continue
        stream.append(record)


def _read(segment: Segment) -> bytes:
    try:
        return storage.read_bytes(segment.url)  # a remote backend's failures are StorageError
    except FileNotFoundError:
        raise
    except OSError as error:
        raise JournalError(f"{segment.url}: cannot read the journal: {error}") from None


def read_segments(segments: Iterable[Segment], warn: Warn | None = None) -> list[dict[str, Any]]:
    """Merge segments into one list ordered by attempt, then time, each writer in its own order."""
    streams: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for segment in segments:
        _add_stream(streams[(segment.attempt, segment.writer)], parse_segment(_read(segment), segment, warn))
    # Within an attempt the CLI and driver streams interleave by timestamp; on a tie the driver's
    # event goes first (the CLI only writes attempt.ended after the driver has gone).
    ordered = sorted(streams.items(), key=lambda item: (item[0][0], item[0][1] != events.WRITER_DRIVER))
    merged = heapq.merge(*(records for _, records in ordered), key=lambda r: (r["attempt"], r["ts"]))
    return list(merged)


def read_journal(run_dir: str, warn: Warn | None = None, attempt: int | None = None) -> list[dict[str, Any]]:
    """Every record of the run (or of one attempt). A segment that vanishes between listing and
    reading was merged into segment 0 by a compaction: the listing is read again."""
    for _ in range(3):
        segments = [s for s in list_segments(run_dir) if attempt is None or s.attempt == attempt]
        try:
            return read_segments(segments, warn)
        except FileNotFoundError:
            continue
    raise JournalError(f"{run_dir}: journal segments kept disappearing while being read")


_DEGRADED_PREFIX = b'{"v":1,"type":"journal.degraded"'
_DRIVER_ENDED_PREFIX = b'{"v":1,"type":"driver.ended"'


def attempt_health(run_dir: str, attempt: int) -> tuple[list[dict[str, Any]], bool]:
    """(journal.degraded records of one attempt, whether its driver wrote driver.ended).

    Scans for the two types by their first bytes instead of parsing every line, so the CLI can
    ask after each attempt without paying for a full read of a long journal. Best effort: a
    journal it cannot read yields nothing here; resume and inspect report it properly.
    """
    gaps: list[dict[str, Any]] = []
    ended = False
    try:
        for segment in list_segments(run_dir):
            if segment.attempt != attempt:
                continue
            for line in storage.read_bytes(segment.url).split(b"\n"):
                if line.startswith(_DEGRADED_PREFIX):
                    try:
                        gaps.append(orjson.loads(line))
                    except orjson.JSONDecodeError:
                        continue
                elif line.startswith(_DRIVER_ENDED_PREFIX) and segment.writer == events.WRITER_DRIVER:
                    ended = True
    except Exception:  # noqa: BLE001 - a health check must not turn a finished attempt into an error
        return gaps, ended
    return gaps, ended
