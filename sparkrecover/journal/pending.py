"""What a journal writer holds while its storage is down, and what it gives up past a memory cap.

docs/design.md §4 rule 7 says the journal never kills the job, so pending lines cannot grow without
bound. Past the cap the oldest Spark telemetry goes first (§4 rule 6: no plan depends on it); only
if pipeline events alone exceed the cap are the oldest of those dropped too, and the names of the
stages whose records were lost are kept, so that ``journal.degraded`` can tell resume to treat those
stages as unfinished. A lost commit record must make a stage rerun, never look committed.
"""

from __future__ import annotations

from typing import Any

import orjson

# The writer serializes the envelope first (``v``, then ``type``), so a line's type can be told
# from its first bytes without parsing it.
_TELEMETRY_PREFIX = b'{"v":1,"type":"spark.'


class Dropped:
    """Running totals of what the cap threw away since storage failed."""

    def __init__(self) -> None:
        self.events = 0
        self.bytes = 0
        self.stages: list[str] = []

    def __bool__(self) -> bool:
        return self.events > 0

    def note(self, line: bytes) -> None:
        self.events += 1
        self.bytes += len(line) + 1
        if line.startswith(_TELEMETRY_PREFIX):
            return
        try:
            record: Any = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        stage = record.get("stage") if isinstance(record, dict) else None
        if isinstance(stage, str) and str(record.get("type", "")).startswith("stage.") and stage not in self.stages:
            self.stages.append(stage)

    def payload(self) -> dict[str, Any]:
        return {"dropped_events": self.events, "dropped_bytes": self.bytes, "dropped_stages": list(self.stages)}


def enforce_cap(buffer: bytearray, cap: int, dropped: Dropped) -> None:
    """Shrink ``buffer`` (complete lines) to at most 3/4 of ``cap`` once it is over ``cap``.

    Shrinking below the cap means the next few emits do not each pay for another pass.
    """
    if len(buffer) <= cap:
        return
    target = cap * 3 // 4
    lines = bytes(buffer).split(b"\n")
    tail = lines.pop()  # b"" after the last newline
    size = len(buffer)
    keep = [True] * len(lines)
    for index, line in enumerate(lines):  # oldest telemetry first
        if size <= target:
            break
        if line.startswith(_TELEMETRY_PREFIX):
            keep[index] = False
            size -= len(line) + 1
            dropped.note(line)
    for index, line in enumerate(lines):  # then the oldest of anything
        if size <= target:
            break
        if keep[index]:
            keep[index] = False
            size -= len(line) + 1
            dropped.note(line)
    kept = [line for line, wanted in zip(lines, keep, strict=True) if wanted]
    buffer[:] = b"".join(line + b"\n" for line in kept) + tail
