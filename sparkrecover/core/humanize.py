"""Numbers as people read them: sizes, durations, counts, times. Shared by every output."""

from __future__ import annotations

import signal as signals


def size(value: int | None) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return str(value)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def tally(counts: dict[str, int] | None) -> str:
    """``{"skip": 2, "run": 1}`` as ``2 skip, 1 run``."""
    return ", ".join(f"{n} {what}" for what, n in (counts or {}).items())


def timestamp(ts: str | None) -> str:
    """A journal timestamp (``2026-11-22T03:15:00.123Z``) to the second, for tables (UTC)."""
    return ts[:19].replace("T", " ") if ts else "-"


def first_line(text: str | None, limit: int = 300) -> str:
    """Errors carry whole tracebacks; one line is what fits a table or a timeline."""
    if not text:
        return ""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"
