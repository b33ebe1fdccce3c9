"""JSON read back into the dataclasses it was written from (``dataclasses.asdict``), driven by
their fields and type hints: one decoder for every record type of a file, so a field added to a
type is read back without anyone writing a reader for it (docs/design.md §4 rule 8).

Strict, because the two sides of a file are the same version of sparkrecover: a field without a
default must be there, an unknown field is refused, and a value of the wrong type too, each with
one ``FormatError`` line (exit 3) that names the field by its path (``stages[2].tasks.kept[0]``).

The types it reads: ``str``, ``int`` (not ``bool``), ``bool``, ``float``, a ``TextEnum`` (by its
text), ``list[X]``, ``dict[str, X]``, ``X | None``, ``Any`` (any JSON value) and dataclasses of those.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any

from sparkrecover.errors import FormatError

_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}


def decode(kind: type, document: Any, where: str) -> Any:
    """``document`` (parsed JSON) as an instance of the dataclass ``kind``; ``where`` names the
    file in errors."""
    return _value(kind, document, where, "")


def _value(kind: Any, value: Any, where: str, path: str) -> Any:
    if kind is Any:
        return value
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        if value is None and len(options) < len(typing.get_args(kind)):
            return None
        if len(options) != 1:
            raise TypeError(f"{kind}: only X | None is read")
        return _value(options[0], value, where, path)
    if origin is list:
        (item,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise _wrong(where, path, "a list", value)
        return [_value(item, element, where, f"{path}[{i}]") for i, element in enumerate(value)]
    if origin is dict:
        _, item = typing.get_args(kind)
        if not isinstance(value, dict):
            raise _wrong(where, path, "an object", value)
        return {key: _value(item, element, where, _join(path, key)) for key, element in value.items()}
    if dataclasses.is_dataclass(kind):
        return _dataclass(kind, value, where, path)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        texts = [member.value for member in kind]
        if value not in texts:
            raise _wrong(where, path, "one of " + ", ".join(map(str, texts)), value)
        return kind(value)
    if kind in (int, float) and isinstance(value, bool):
        raise _wrong(where, path, _NAMES[kind], value)
    if kind is float and isinstance(value, int):
        return float(value)
    if kind in _NAMES:
        if not isinstance(value, kind):
            raise _wrong(where, path, _NAMES[kind], value)
        return value
    raise TypeError(f"{kind} is not a type the decoder reads")


def _dataclass(kind: Any, value: Any, where: str, path: str) -> Any:
    if not isinstance(value, dict):
        raise _wrong(where, path, "an object", value)
    hints, required = _fields(kind)
    unknown = [key for key in value if key not in hints]
    if unknown:
        raise FormatError(f"{where}: {_join(path, str(unknown[0]))} is not a field this sparkrecover knows")
    missing = [name for name in required if name not in value]
    if missing:
        raise FormatError(f"{where}: {_join(path, missing[0])} is missing")
    return kind(**{name: _value(hints[name], item, where, _join(path, name)) for name, item in value.items()})


@cache
def _fields(kind: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A dataclass's fields with their resolved types, and those without a default."""
    hints = typing.get_type_hints(kind)
    fields = [field for field in dataclasses.fields(kind) if field.init]
    required = tuple(
        field.name
        for field in fields
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )
    return {field.name: hints[field.name] for field in fields}, required


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _wrong(where: str, path: str, expected: str, value: Any) -> FormatError:
    subject = path or "the document"
    return FormatError(f"{where}: {subject} must be {expected}, not {value!r:.80}")
