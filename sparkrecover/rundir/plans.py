"""``plans/<attempt>.json``: the plan a resumed attempt was launched with (DESIGN §5, rule 8:
pure data, read back with ``orjson`` and checked, never executed)."""

from __future__ import annotations

from typing import Any

import orjson

from sparkrecover.errors import FormatError
from sparkrecover.rundir import formats, runs, storage


def write_plan(run_dir: str, attempt: int, document: dict[str, Any]) -> str:
    """Store the plan for ``attempt``; returns its URL (handed to the driver bootstrap)."""
    url = runs.plan_url(run_dir, attempt)
    storage.write_atomic(url, orjson.dumps(formats.stamped(formats.PLAN, document), option=orjson.OPT_INDENT_2))
    return url


def read_plan(url: str) -> dict[str, Any]:
    try:
        document = orjson.loads(storage.read_bytes(url))
    except orjson.JSONDecodeError as error:
        raise FormatError(f"{url}: the plan is not valid JSON: {error}") from None
    return formats.checked(formats.PLAN, document, url)
