"""Reads a run's journal back: every segment, checked, merged into one ordered event stream.

A torn last line of a segment (a writer killed mid-write) is dropped with a warning; any other
malformed line is corruption and raises ``JournalDamagedError`` naming the file and line and what
to do (``resume --from-scratch`` sets damaged segments aside: ``damaged_segments``). A record seen
twice in one writer's stream is kept once: a
compaction between its upload and its deletes, or a write retried after a partial failure, leaves
such copies; seqs only grow, so any record at or below the last seq read is one. Storage errors
while reading are ``JournalError`` too (exit 3).

Order: by attempt, then by time; within an attempt the CLI and driver streams interleave by
timestamp, the driver's event first on a tie (the CLI only writes ``attempt.ended`` after the
driver has gone), each writer's events in its own order.

``iter_journal`` streams: it holds one line at a time of the large driver streams (plus the few
CLI events of the attempt being read), so ``resume`` folds a journal of a million events in
bounded memory. ``read_journal`` is the same as a list.
"""

from __future__ import annotations

import heapq
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, groupby
from typing import Any

import orjson

from sparkrecover.errors import JournalDamagedError, JournalError
from sparkrecover.journal import events
from sparkrecover.journal.segments import Segment, list_segments
from sparkrecover.rundir import storage

Warn = Callable[[str], None]


def _check_record(record: Any, where: str, segment: Segment) -> None:
    problem = events.record_problem(record, segment.attempt, segment.writer)
    if problem is None:
        return
    if isinstance(record, dict) and isinstance(record.get("v"), int) and record["v"] > events.SCHEMA_VERSION:
        raise JournalError(f"{where}: {problem}")  # not damage: a newer sparkrecover wrote it
    raise JournalDamagedError(where, problem)


def _open(segment: Segment) -> Any:
    if storage.is_local(segment.url):
        return open(storage.normalize(segment.url), "rb", buffering=1 << 20)
    try:
        return io.BytesIO(storage.read_bytes(segment.url))  # a remote backend's failures are StorageError
    except FileNotFoundError:
        raise  # compacted away since the listing: the caller lists again
    except OSError as error:
        raise JournalError(f"{segment.url}: cannot read the journal: {error}") from None


def _stream(
    segments: list[Segment],
    warn: Warn | None,
    others: Sequence[dict[str, Any]] = (),
    opener: Callable[[Segment], Any] = _open,
    first_line: int = 1,
) -> Iterator[dict[str, Any]]:
    """One writer's records of one attempt, segment after segment, with ``others`` (the attempt's
    few CLI records) merged in by timestamp, this stream's record first on a tie: exactly what
    ``heapq.merge`` does with two streams. Everything happens in this one loop because it runs
    once per journal line: one generator and a handful of dict lookups per line is what makes a
    million-line journal fold in about a second."""
    loads, version, required = orjson.loads, events.SCHEMA_VERSION, events.REQUIRED
    index, count = 0, len(others)
    # A writer numbers its records 0, 1, 2, ... and never goes back: a seq at or below one already
    # read can only be a copy (a compaction caught between upload and deletes, a retried write).
    last_seq = -1
    head_ts = others[0]["ts"] if count else None
    for segment in segments:
        attempt, writer = segment.attempt, segment.writer
        with opener(segment) as handle:
            for number, line in enumerate(handle, start=first_line):
                try:
                    record = loads(line)
                except orjson.JSONDecodeError:
                    where = f"{segment.url}:{number}"
                    if line.endswith(b"\n"):
                        raise JournalDamagedError(where, "malformed journal line") from None
                    if warn:
                        warn(f"{where}: dropped a torn last line ({len(line)} bytes; the writer stopped mid-write)")
                    break
                # The usual record in a few lookups; anything else gets the full check, which
                # names the problem or accepts it.
                try:
                    usual = (
                        record["v"] == version
                        and record["attempt"] == attempt
                        and record["writer"] == writer
                        and record["type"].__class__ is str
                        and record["seq"].__class__ is int
                        and "run" in record
                        and "ts" in record
                        and record["type"] not in required
                    )
                except (KeyError, TypeError):
                    usual = False
                if not usual:
                    _check_record(record, f"{segment.url}:{number}", segment)
                if record["seq"] <= last_seq:
                    continue
                last_seq = record["seq"]
                if head_ts is not None and record["ts"] > head_ts:
                    while head_ts is not None and record["ts"] > head_ts:
                        yield others[index]
                        index += 1
                        head_ts = others[index]["ts"] if index < count else None
                yield record
    yield from others[index:]


def parse_segment(data: bytes, segment: Segment, warn: Warn | None = None, first_line: int = 1) -> list[dict[str, Any]]:
    """The records of one segment file, in file order. ``first_line`` numbers the first line of
    ``data`` when it is the rest of a segment read before (``inspect --follow``)."""
    return list(_stream([segment], warn, opener=lambda _: io.BytesIO(data), first_line=first_line))


def iter_segments(segments: Iterable[Segment], warn: Warn | None = None) -> Iterator[dict[str, Any]]:
    """Records of these segments in journal order (see the module's docstring)."""
    # chain() hands each record on in C: no generator of ours between the reader and its user.
    return chain.from_iterable(_attempt_streams(segments, warn))


def _attempt_streams(segments: Iterable[Segment], warn: Warn | None) -> Iterator[Iterator[dict[str, Any]]]:
    """One merged stream per attempt, in attempt order, the driver's as the long one."""
    ordered = sorted(segments, key=lambda s: (s.attempt, s.writer != events.WRITER_DRIVER, s.writer, s.index))
    for _, of_attempt in groupby(ordered, key=lambda s: s.attempt):
        streams = [list(group) for _, group in groupby(of_attempt, key=lambda s: s.writer)]
        small = [list(_stream(stream, warn)) for stream in streams[1:]]
        if len(small) > 1:
            small = [list(heapq.merge(*small, key=lambda r: r["ts"]))]
        yield _stream(streams[0], warn, small[0] if small else [])


def iter_journal(
    run_dir: str, warn: Warn | None = None, attempt: int | None = None, since: int | None = None
) -> Iterator[dict[str, Any]]:
    """The run's records as a stream (of one ``attempt``, or of the attempts ``since`` on). A
    segment compacted away while this reads raises FileNotFoundError: callers that fold the
    stream start again (``planning/reading.py``)."""
    return iter_segments(
        [
            s
            for s in list_segments(run_dir)
            if (attempt is None or s.attempt == attempt) and (since is None or s.attempt >= since)
        ],
        warn,
    )


def read_journal(run_dir: str, warn: Warn | None = None, attempt: int | None = None) -> list[dict[str, Any]]:
    """Every record of the run (or of one attempt). A segment that vanishes between listing and
    reading was merged into segment 0 by a compaction: the listing is read again."""
    for _ in range(3):
        try:
            return list(iter_journal(run_dir, warn, attempt))
        except FileNotFoundError:
            continue
    raise JournalError(f"{run_dir}: journal segments kept disappearing while being read")


def damaged_segments(run_dir: str) -> list[Segment]:
    """The segments the reader refuses (``JournalDamagedError``), each read on its own."""
    damaged = []
    for segment in list_segments(run_dir):
        try:
            for _ in _stream([segment], None):
                pass
        except JournalDamagedError:
            damaged.append(segment)
    return damaged


def salvage_records(segment: Segment) -> Iterator[dict[str, Any]]:
    """The sound records of a damaged segment, line by line, damaged lines left out."""
    for line in storage.read_bytes(segment.url).split(b"\n"):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if events.record_problem(record, segment.attempt, segment.writer) is None:
            yield record


def read_salvaged(run_dir: str, warn: Warn | None = None) -> tuple[list[dict[str, Any]], list[Segment]]:
    """What a damaged journal still says: the sound segments merged as usual, with the sound
    records of the damaged ones put in by attempt and time; and the damaged segments."""
    damaged = damaged_segments(run_dir)
    names = {segment.url for segment in damaged}
    records = list(iter_segments([s for s in list_segments(run_dir) if s.url not in names], warn))
    rescued = [record for segment in damaged for record in salvage_records(segment)]
    if rescued:
        # sorted() is stable: each stream keeps its own order among equal timestamps.
        records = sorted(records + rescued, key=lambda r: (r["attempt"], r["ts"]))
    return records, damaged


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
    except Exception:
        return gaps, ended
    return gaps, ended
