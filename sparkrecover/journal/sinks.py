"""Where a journal writer's bytes go: appended segment files on local disk, rewritten segment
objects on object stores (S3, GCS, ``memory://`` and any other non-local fsspec URL).

Object stores have no append, so a flush rewrites the current segment object whole. A segment
rolls over once it holds ``segment_bytes`` or has been rewritten for ``segment_age`` seconds,
whichever comes first, so one writer of one attempt makes at most

    total journal bytes / segment_bytes + attempt duration / segment_age + 1

objects, and one flush uploads at most ``segment_bytes`` plus what was buffered. The age limit
also keeps any one key from being rewritten for hours (some stores throttle repeated writes of
one key). When the writer closes cleanly, its segments are compacted into segment 0, so a
finished attempt leaves one object per writer.
"""

from __future__ import annotations

import os
import time

from sparkrecover.journal.segments import segment_url
from sparkrecover.rundir import storage

LOCAL_SEGMENT_BYTES = 64 << 20
OBJECT_SEGMENT_BYTES = 8 << 20
OBJECT_SEGMENT_AGE = 600.0
# Above this, compaction would hold one upload open for too long; the segments stay as they are
# (the bound above still holds).
COMPACT_MAX_BYTES = 256 << 20


class LocalSink:
    """Appends to a segment file. A write that fails half-way is cut back off the file, so a
    retry never leaves a record twice; if even that fails, the writer moves on to a fresh
    segment (a torn line can then only be the last line of its segment, which readers drop, and
    readers also drop a repeated record)."""

    def __init__(self, run_dir: str, attempt: int, writer: str, segment_bytes: int | None = None):
        self._args = (storage.normalize(run_dir), attempt, writer)
        self._segment_bytes = segment_bytes or LOCAL_SEGMENT_BYTES
        self._index = 0
        self._fd: int | None = None
        self._written = 0  # bytes of whole records in the current segment

    def write(self, data: bytes, durable: bool) -> None:
        if self._fd is None:
            path = segment_url(*self._args, self._index)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._written = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if durable:
                os.fsync(self._fd)
        except BaseException:
            self._undo()
            raise
        self._written += len(data)
        if self._written >= self._segment_bytes:
            self._roll()

    def _undo(self) -> None:
        try:
            os.ftruncate(self._fd, self._written)  # type: ignore[arg-type]
        except OSError:
            self._roll()

    def _roll(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = None
        self._index += 1

    def close(self, compact: bool = True) -> None:
        # Appending needs no compaction: a local segment only rolls at segment_bytes.
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ObjectSink:
    """Rewrites the current segment object whole on every flush (no append on object stores)."""

    def __init__(
        self,
        run_dir: str,
        attempt: int,
        writer: str,
        segment_bytes: int | None = None,
        segment_age: float | None = None,
    ):
        self._args = (run_dir, attempt, writer)
        self._segment_bytes = segment_bytes or OBJECT_SEGMENT_BYTES
        self._segment_age = segment_age or OBJECT_SEGMENT_AGE
        self._index = 0
        self._content = b""  # the current segment as uploaded; immutable, so no copy to upload it
        self._opened = 0.0
        self._total = 0

    @property
    def segments(self) -> int:
        """How many segment objects this sink has written so far."""
        return self._index + (1 if self._content else 0)

    def write(self, data: bytes, durable: bool) -> None:
        now = time.monotonic()
        if self._content and now - self._opened >= self._segment_age:
            self._roll()
        url = segment_url(*self._args, self._index)
        fs, path = storage.filesystem(url)
        content = self._content + data
        fs.pipe_file(path, content)  # one PUT: readers see the old or the new object
        if not self._content:  # on failure nothing changed here: the writer retries data
            self._opened = now
        self._content = content
        self._total += len(data)
        if len(content) >= self._segment_bytes:
            self._roll()

    def _roll(self) -> None:
        self._index += 1
        self._content = b""

    def close(self, compact: bool = True) -> None:
        if compact and self.segments > 1 and self._total <= COMPACT_MAX_BYTES:
            self._compact()

    def _compact(self) -> None:
        """Merge segments 0..n into segment 0, then delete 1..n.

        The new segment 0 lands in one atomic upload; until the deletes finish, a reader sees
        records twice, which it drops as exact duplicates (same writer, attempt, seq, content).
        A failure anywhere leaves a readable journal, so errors are left to the caller to ignore.
        """
        count = self.segments
        urls = [segment_url(*self._args, index) for index in range(count)]
        fs, first = storage.filesystem(urls[0])
        last = self._content or None
        # Segment 0 is read before the upload opens: some backends (memory://) truncate at open.
        first_part = last if count == 1 and last is not None else fs.cat_file(first)
        # Streamed through one upload, a part at a time: memory stays at about two segments.
        # A part size of one segment (S3's minimum part is 5 MiB) keeps s3fs from buffering 50 MiB.
        with fs.open(first, "wb", block_size=max(self._segment_bytes, 5 << 20)) as handle:
            handle.write(first_part)
            for index in range(1, count):
                if index == count - 1 and last is not None:
                    handle.write(last)
                else:
                    handle.write(fs.cat_file(storage.filesystem(urls[index])[1]))
        for url in urls[1:]:
            fs.rm_file(storage.filesystem(url)[1])
        self._index, self._content = 0, b""
