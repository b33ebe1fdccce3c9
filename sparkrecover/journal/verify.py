"""``replay --verify``: check a whole journal and report every problem, not just the first.

The reader stops at the first corruption (it must refuse to plan from a broken journal); this
check goes on and classifies what it finds:

- problems (corruption, exit 3): a malformed line that is not a segment's last, an envelope
  that breaks format v1, a record in a segment named for another attempt or writer, a missing
  segment, per-writer ``seq`` numbers that repeat or jump (events lost without a trace);
- warnings: a torn last line (a writer killed mid-write: expected after a crash), a ``seq`` gap
  the writer itself recorded as dropped in ``journal.degraded``, a timestamp that goes back
  within one writer (a wall clock stepped back: it changes the display order, never a plan),
  files in the journal folder that are not segments, records naming another run than the folder.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from sparkrecover.errors import RunNotFoundError
from sparkrecover.journal import events
from sparkrecover.journal.segments import Segment, parse_segment_name
from sparkrecover.journal.tail import journal_files
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run

MAX_FINDINGS = 200  # a journal broken everywhere is reported by its first problems, not a million


@dataclass
class Finding:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class _Stream:
    """One writer of one attempt, across its segments."""

    attempt: int
    writer: str
    segments: int = 0
    events: int = 0
    next_seq: int = 0
    last_ts: str = ""
    last_where: str = ""
    gaps: list[Finding] = field(default_factory=list)
    unreadable: bool = False  # a line was unreadable since the last good record: a gap is its echo
    dropped_at: str | None = None  # where journal.degraded says lines were dropped


@dataclass
class VerifyReport:
    run_id: str
    run_dir: str
    segments: int = 0
    events: int = 0
    streams: list[dict[str, Any]] = field(default_factory=list)
    event_types: Counter = field(default_factory=Counter)
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    omitted: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, where: str, message: str) -> None:
        self._add(self.problems, where, message)

    def warning(self, where: str, message: str) -> None:
        self._add(self.warnings, where, message)

    def _add(self, findings: list[Finding], where: str, message: str) -> None:
        if len(self.problems) + len(self.warnings) >= MAX_FINDINGS:
            self.omitted += 1
        else:
            findings.append(Finding(where, message))

    def document(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "run_dir": self.run_dir,
            "ok": self.ok,
            "segments": self.segments,
            "events": self.events,
            "streams": self.streams,
            "problems": [vars(f) for f in self.problems],
            "warnings": [vars(f) for f in self.warnings],
            "omitted": self.omitted,
            "event_types": dict(sorted(self.event_types.items())),
        }


def envelope_problem(record: Any, segment: Segment) -> str | None:
    """What makes a record unreadable, as the reader judges it, plus the strict checks."""
    return events.record_problem(record, segment.attempt, segment.writer, strict=True)


def verify_journal(run: Run) -> VerifyReport:
    files = journal_files(run.dir)
    if files is None:
        raise RunNotFoundError(f"no run {run.id!r} at {run.dir}")
    report = VerifyReport(run.id, run.dir)
    segments = []
    for name, url, _ in sorted(files):
        parsed = parse_segment_name(name)
        if parsed is None:
            report.warning(url, "not a journal segment name; readers ignore this file")
        elif parsed[1] not in events.WRITERS:
            report.problem(url, f"segment of an unknown writer {parsed[1]!r}")
        else:
            segments.append(Segment(*parsed, url))
    streams: dict[tuple[int, str], _Stream] = {}
    runs_named: Counter = Counter()
    first_named: dict[str, str] = {}
    for segment in sorted(segments):
        stream = streams.setdefault((segment.attempt, segment.writer), _Stream(segment.attempt, segment.writer))
        if segment.index != stream.segments:
            missing = ", ".join(f"{index:06d}" for index in range(stream.segments, segment.index)[:5])
            report.problem(
                segment.url,
                f"segment {missing}{'...' if segment.index - stream.segments > 5 else ''} "
                f"of attempt {segment.attempt}/{segment.writer} is missing before this one",
            )
        stream.segments = segment.index + 1
        report.segments += 1
        for record, where in _records(storage.read_bytes(segment.url), segment, stream, report):
            _check_order(record, where, stream, report)
            runs_named[record["run"]] += 1
            first_named.setdefault(record["run"], where)
            report.event_types[record["type"]] += 1
            report.events += 1
            stream.events += 1
    for stream in streams.values():
        for gap in stream.gaps:
            if stream.dropped_at:
                report.warning(
                    gap.where,
                    f"{gap.message}: dropped while the journal's storage was failing "
                    f"(journal.degraded at {stream.dropped_at})",
                )
            else:
                report.problem(gap.where, gap.message)
    _check_run_names(runs_named, first_named, report)
    report.streams = [
        {"attempt": s.attempt, "writer": s.writer, "segments": s.segments, "events": s.events} for s in streams.values()
    ]
    return report


def _records(data: bytes, segment: Segment, stream: _Stream, report: VerifyReport):
    """(record, where) of each sound line; problems and torn tails go to the report."""
    lines = data.split(b"\n")
    unterminated = lines.pop()
    for number, line in enumerate(lines, start=1):
        where = f"{segment.url}:{number}"
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            report.problem(where, "malformed journal line")
            stream.unreadable = True
            continue
        problem = envelope_problem(record, segment)
        if problem:
            report.problem(where, problem)
            stream.unreadable = True
            continue
        yield record, where
    if unterminated:
        where = f"{segment.url}:{len(lines) + 1}"
        try:
            record = orjson.loads(unterminated)
        except orjson.JSONDecodeError:
            report.warning(
                where, f"torn last line ({len(unterminated)} bytes; the writer stopped mid-write); readers drop it"
            )
            return
        problem = envelope_problem(record, segment)
        if problem:
            report.problem(where, problem)
        else:
            yield record, where


def _check_order(record: dict[str, Any], where: str, stream: _Stream, report: VerifyReport) -> None:
    seq = record["seq"]
    if seq > stream.next_seq and not stream.unreadable:
        missing = seq - stream.next_seq
        jump = f"seq jumps from {stream.next_seq - 1} to {seq}" if stream.next_seq else f"the first seq is {seq}, not 0"
        stream.gaps.append(Finding(where, f"{jump}: {missing} event{'s' if missing > 1 else ''} missing"))
    elif seq < stream.next_seq:
        report.problem(
            where,
            f"seq {seq} again after seq {stream.next_seq - 1} (at {stream.last_where}): a repeated or reordered event",
        )
    stream.next_seq, stream.unreadable = max(stream.next_seq, seq + 1), False
    if stream.last_ts and record["ts"] < stream.last_ts:
        report.warning(
            where,
            f"time goes back from {stream.last_ts} to {record['ts']} within "
            f"attempt {stream.attempt}/{stream.writer} (a clock stepped back?)",
        )
    stream.last_ts, stream.last_where = max(stream.last_ts, record["ts"]), where
    if record["type"] == events.JOURNAL_DEGRADED and record.get("dropped_bytes"):
        stream.dropped_at = stream.dropped_at or where


def _check_run_names(runs_named: Counter, first_named: dict[str, str], report: VerifyReport) -> None:
    if not runs_named:
        return
    main, _ = runs_named.most_common(1)[0]
    for other, count in runs_named.items():
        if other != main:
            report.problem(
                first_named[other],
                f"{count} record(s) name run {other!r}, the others {main!r}: records of another run were copied here",
            )
    if main != report.run_id:
        report.warning(report.run_dir, f"the records name run {main!r}, the folder is {report.run_id!r} (renamed?)")
