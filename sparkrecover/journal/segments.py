"""Names of journal segment files: ``journal/<attempt:04d>-<writer>-<segment:06d>.jsonl``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import JOURNAL_DIR

_NAME = re.compile(r"^(\d{4,})-([a-z]+)-(\d{6,})\.jsonl$")


@dataclass(frozen=True, order=True)
class Segment:
    attempt: int
    writer: str
    index: int
    url: str

    @property
    def name(self) -> str:
        return segment_name(self.attempt, self.writer, self.index)


def segment_name(attempt: int, writer: str, index: int) -> str:
    return f"{attempt:04d}-{writer}-{index:06d}.jsonl"


def segment_url(run_dir: str, attempt: int, writer: str, index: int) -> str:
    return storage.join(run_dir, JOURNAL_DIR, segment_name(attempt, writer, index))


def list_segments(run_dir: str) -> list[Segment]:
    """Every segment of the run, in (attempt, writer, index) order; files of other names are ignored."""
    journal_dir = storage.join(run_dir, JOURNAL_DIR)
    try:
        names = storage.listdir(journal_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = _NAME.match(name)
        if match:
            attempt, writer, index = int(match[1]), match[2], int(match[3])
            found.append(Segment(attempt, writer, index, storage.join(journal_dir, name)))
    return sorted(found)


def next_attempt(run_dir: str) -> int:
    return latest_attempt(run_dir) + 1


def latest_attempt(run_dir: str) -> int:
    """The highest attempt number any segment of the run has (0: none yet)."""
    return max((s.attempt for s in list_segments(run_dir)), default=0)


def claim(run_dir: str, attempt: int, writer: str) -> bool:
    """Make the first segment of ``writer`` in ``attempt``, empty; False when it exists. A driver
    claims its attempt so: of two drivers claiming one number, one wins (in one step on local disk
    and on S3: ``storage.create_new``), and the loser has written nothing. The writer then appends
    to the segment (local) or rewrites it whole (object stores), as to any segment of its own."""
    return storage.create_new(segment_url(run_dir, attempt, writer, 0), b"")


def parse_segment_name(name: str) -> tuple[int, str, int] | None:
    """(attempt, writer, index) of a segment file name; None for any other file."""
    match = _NAME.match(name)
    return (int(match[1]), match[2], int(match[3])) if match else None
