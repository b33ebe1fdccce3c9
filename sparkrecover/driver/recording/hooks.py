"""Every pyspark method sparkrecover hooks, in one patch table, and what readers and writers were told.

Only the driver bootstrap installs hooks (``zerocode``, ``sqlwrites`` and ``schemas`` patch through
``patch`` here), so plain ``spark-submit``, notebooks and the command line never see them; a
patched method does exactly what pyspark's does when no sparkrecover runtime is active.
``uninstall`` puts every original back (tests).

pyspark's readers and writers hand their format, mode and options to a JVM object and never read
them back, so ``track`` notes each such call on the Python object, in order (``told``).
``writer_call`` is the one parser of a ``DataFrameWriter`` call: its path, mode, format and options.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkrecover.driver.tasks.partitions import FILE_FORMATS

# Formats with a transaction log of their own: removing files behind their back would corrupt
# them, so their writes are recorded like sinks that cannot be verified.
LOGGED_FORMATS = frozenset({"delta", "iceberg", "hudi"})
# Save modes as Spark spells them, by every name pyspark accepts.
_MODES = {
    "append": "append",
    "overwrite": "overwrite",
    "ignore": "ignore",
    "error": "errorifexists",
    "errorifexists": "errorifexists",
    "default": "errorifexists",
}

_originals: dict[tuple[type, str], Any] = {}


def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
    """Replace ``cls.name`` with ``make(original)`` (once: a second patch of it is ignored)."""
    if (cls, name) in _originals:
        return
    original = getattr(cls, name)
    _originals[(cls, name)] = original
    setattr(cls, name, functools.wraps(original)(make(original)))


def uninstall() -> None:
    """Put pyspark's own methods back."""
    for (cls, name), original in _originals.items():
        setattr(cls, name, original)
    _originals.clear()


# -- what a reader or writer was told ------------------------------------------------------------


def calls(obj: Any) -> list[tuple[Any, ...]]:
    """The ``("format", f)``, ``("mode", m)``, ``("option", key, value)`` and ``("schema",)`` calls
    made on this reader or writer so far, in order."""
    made = obj.__dict__.get("_sr_calls")
    if made is None:
        made = obj._sr_calls = []
    return made


def track(cls: type, methods: tuple[str, ...]) -> None:
    """Note the calls of ``methods`` (of format, mode, option, options, schema) on ``cls``'s objects."""
    for method in methods:
        patch(cls, method, _TRACKERS[method])


def _tracking_one(kind: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        parameter = list(inspect.signature(original).parameters)[1]

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            value = args[0] if args else kwargs.get(parameter)
            if value is not None:
                calls(self).append((kind, value))
            return result

        return method

    return make


def _tracking_option(original: Any) -> Any:
    def option(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Positional, keyword or both: args may hold fewer than the two names.
        given = dict(zip(("key", "value"), args, strict=False), **kwargs)
        result = original(self, *args, **kwargs)
        if given.get("value") is not None:  # pyspark ignores an option set to None
            calls(self).append(("option", given.get("key"), given["value"]))
        return result

    return option


def _tracking_options(original: Any) -> Any:
    def options(self: Any, **given: Any) -> Any:
        result = original(self, **given)
        calls(self).extend(("option", key, value) for key, value in given.items() if value is not None)
        return result

    return options


def _tracking_schema(original: Any) -> Any:
    def schema(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        calls(self).append(("schema",))
        return result

    return schema


_TRACKERS: dict[str, Callable[[Any], Any]] = {
    "format": _tracking_one("format"),
    "mode": _tracking_one("mode"),
    "option": _tracking_option,
    "options": _tracking_options,
    "schema": _tracking_schema,
}


def option_text(value: Any) -> str:
    """An option's value as Spark gets it (pyspark's ``to_str``: booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class Told:
    """What a reader or writer was told before the call, the last word on each winning."""

    format: str | None = None
    mode: str | None = None
    options: dict[str, str] = field(default_factory=dict)  # keys in lower case: Spark's are case-insensitive
    schema: bool = False  # a reader was given a schema


def told(obj: Any) -> Told:
    found = Told()
    for call in calls(obj):
        if call[0] == "format":
            found.format = str(call[1])
        elif call[0] == "mode":
            found.mode = str(call[1])
        elif call[0] == "option":
            found.options[str(call[1]).lower()] = option_text(call[2])
        elif call[0] == "schema":
            found.schema = True
    return found


def normal_mode(mode: Any) -> str:
    """A save mode as Spark names it (no mode: errorifexists)."""
    return _MODES.get(str(mode).lower(), str(mode).lower()) if mode is not None else "errorifexists"


@dataclass
class WriterCall:
    """One ``DataFrameWriter`` call as Spark will make it."""

    method: str  # save, parquet, saveAsTable, insertInto, jdbc, ...
    path: str | None  # the output folder, for a path write
    mode: str  # normal_mode
    format: str | None  # None: the session's default source
    options: dict[str, str]

    @property
    def logged(self) -> bool:
        return str(self.format or "").lower() in LOGGED_FORMATS


def writer_call(writer: Any, method: str, bound: dict[str, Any]) -> WriterCall:
    """The call of ``method`` on ``writer`` with its bound arguments, as Spark sees it: what the
    arguments say wins over what the writer was told before."""
    before = told(writer)
    options = dict(before.options)
    options.update((k.lower(), option_text(v)) for k, v in (bound.get("options") or {}).items() if v is not None)
    mode = normal_mode(bound.get("mode") or before.mode)
    fmt = method if method in FILE_FORMATS else (bound.get("format") or before.format)
    path = bound.get("path")
    if path is None and method in ("save", "saveAsTable"):
        path = options.get("path")  # .option("path", p).save() / a table at a given location
    return WriterCall(method, str(path) if path is not None else None, mode, fmt, options)
