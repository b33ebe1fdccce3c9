"""Keep secrets out of the journal (docs/design.md §4 rule 9)."""

from __future__ import annotations

import re

REDACTED = "*****"
_SECRET_KEY = re.compile(
    r"passw(or)?d|secret|token|credential|access[._-]?key|session[._-]?key|private[._-]?key|"
    r"api[._-]?key",
    re.IGNORECASE,
)


# Keys that name where credentials come from, not credentials: resume needs them as they were.
_NOT_SECRET = re.compile(r"(provider|providers|\.class|\.type)$", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET.search(key.strip())


def redact_args(args: list[str]) -> list[str]:
    """Redact ``--conf key=secret``, ``--x-password=secret`` and ``--x-password secret``."""
    out: list[str] = []
    hide_next = False
    for item in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if item.startswith("-") and "=" in item:
            name, _, _ = item.partition("=")
            out.append(f"{name}={REDACTED}" if is_secret_key(name) else item)
        elif item.startswith("-"):
            out.append(item)
            hide_next = is_secret_key(item)
        elif "=" in item:
            key, _, _ = item.partition("=")
            out.append(f"{key}={REDACTED}" if is_secret_key(key) else item)
        else:
            out.append(item)
    return out


def has_redacted(args: list[str]) -> list[str]:
    """The arguments of a recorded command line that were redacted."""
    return [item for item in args if item == REDACTED or item.endswith("=" + REDACTED)]
