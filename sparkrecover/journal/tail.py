"""Following a journal while it is written: each poll reads only what the segments gained.

Writers only ever append to a local segment or, on object stores, rewrite a segment object with a
longer copy of itself, so the bytes before a segment's last newline never change: a reader can
keep an offset per segment and fetch the rest (a ranged GET on object stores). A line without its
newline yet is left for the next poll. Should a segment ever come back shorter (rewritten or
compacted), it is read again from the start and the records already seen are dropped by their
per-writer ``seq``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sparkrecover.journal import events
from sparkrecover.journal.reader import parse_segment
from sparkrecover.journal.segments import Segment, parse_segment_name
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import JOURNAL_DIR

Warn = Callable[[str], None]


def journal_files(run_dir: str) -> list[tuple[str, str, int]] | None:
    """(name, url, size) of every file in the run's journal folder; None when there is none.

    One listing gives the sizes too, so a poll of an unchanged journal on an object store costs a
    single LIST request.
    """
    journal_dir = storage.join(run_dir, JOURNAL_DIR)
    if storage.is_local(journal_dir):
        try:
            with os.scandir(storage.normalize(journal_dir)) as entries:
                return [(e.name, e.path, e.stat().st_size) for e in entries if e.is_file()]
        except FileNotFoundError:
            return None
    fs, path = storage.filesystem(journal_dir)
    fs.invalidate_cache(path)  # s3fs & co. cache listings; a follower must see new segments
    try:
        infos = fs.ls(path, detail=True)
    except FileNotFoundError:
        return None
    found = []
    for info in infos:
        if info.get("type", "file") == "file":
            name = info["name"].rstrip("/").rsplit("/", 1)[-1]
            found.append((name, storage.join(journal_dir, name), int(info.get("size") or 0)))
    return found


def read_from(url: str, offset: int) -> bytes:
    if storage.is_local(url):
        with open(storage.normalize(url), "rb") as handle:
            handle.seek(offset)
            return handle.read()
    fs, path = storage.filesystem(url)
    return fs.cat_file(path, start=offset)


def merge_key(record: dict[str, Any]) -> tuple:
    """The reader's order: attempt, then time, the driver's event first on a tie."""
    return record["attempt"], record["ts"], record["writer"] != events.WRITER_DRIVER


class JournalTail:
    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._offsets: dict[str, int] = {}
        self._lines: dict[str, int] = {}
        self._pending: dict[Segment, int] = {}  # bytes of an unterminated last line, per segment
        self._last_seq: dict[tuple[int, str], int] = defaultdict(lambda: -1)
        self.found_journal = False

    def poll(self) -> list[dict[str, Any]]:
        """The records written since the last poll, in the reader's order."""
        files = journal_files(self.run_dir)
        if files is None:
            return []
        self.found_journal = True
        segments = []
        for name, url, size in files:
            parsed = parse_segment_name(name)
            if parsed:
                segments.append((Segment(*parsed, url), size))
        fresh: list[dict[str, Any]] = []
        for segment, size in sorted(segments):
            fresh.extend(self._read_segment(segment, size))
        fresh.sort(key=merge_key)
        return fresh

    def _read_segment(self, segment: Segment, size: int) -> list[dict[str, Any]]:
        url = segment.url
        offset = self._offsets.get(url, 0)
        if size < offset:  # rewritten shorter: read it again, known records are skipped below
            offset, self._lines[url] = 0, 0
        elif size == offset:
            return []
        data = read_from(url, offset)
        end = data.rfind(b"\n") + 1
        self._pending[segment] = len(data) - end
        self._offsets[url] = offset + end
        first_line = self._lines.get(url, 0) + 1
        self._lines[url] = first_line - 1 + data.count(b"\n", 0, end)
        return self._fresh(parse_segment(data[:end], segment, first_line=first_line), segment)

    def _fresh(self, records: list[dict[str, Any]], segment: Segment) -> list[dict[str, Any]]:
        """The records not seen yet: a segment read again repeats what it held before."""
        stream = (segment.attempt, segment.writer)
        fresh = []
        for record in records:
            if record["seq"] > self._last_seq[stream]:
                self._last_seq[stream] = record["seq"]
                fresh.append(record)
        return fresh

    def drain(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Once the writers are gone: the records of last lines that lack only their newline (the
        reader keeps those too), and a warning for each torn one."""
        records: list[dict[str, Any]] = []
        warnings: list[str] = []
        for segment, size in sorted(self._pending.items()):
            if size:
                rest = read_from(segment.url, self._offsets[segment.url])
                first_line = self._lines.get(segment.url, 0) + 1
                records += self._fresh(parse_segment(rest, segment, warnings.append, first_line), segment)
        self._pending.clear()
        return sorted(records, key=merge_key), warnings
