"""Action results as typed JSON (docs/design.md §4c): what a resumed driver hands back must be the
value the action returned, of the same Python types, and a result file is data, never code — no
pickle is ever loaded back (§4 rule 8).

Two shapes:

- rows of a DataFrame (``collect``, ``take``, ``first`` …): encoded along Spark's schema, which the
  file keeps beside them, and decoded into ``Row`` objects exactly as ``collect`` builds them
  (dates, timestamps, decimals, binary, nested structs, arrays and maps restored by their type);
- plain values (``count``, an RDD's ``sum``, ``countByKey``'s dict, ``stats()``): JSON, with a
  tagged object for each Python type JSON lacks (tuple, dict with other keys than strings,
  ``defaultdict(int)``, ``Row``, ``StatCounter``, non-finite floats, big ints, dates, decimals,
  bytes).

Anything else (a user-defined type, an object of the user's class inside an RDD) raises
``Unrecordable`` with the type's name: that action is not kept and runs again on resume.
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any

Convert = Callable[[Any], Any]
_MAX_INT = 1 << 63


class Unrecordable(Exception):
    """A value this codec cannot represent exactly: the action runs again on resume instead."""


# -- rows along a schema --------------------------------------------------------------------------


def row_codec(schema: Any) -> tuple[Convert, Convert]:
    """(encode, decode) of one row of ``schema`` (a ``StructType``), built once per result."""
    return _struct(schema)


def _float(value: float) -> Any:
    return value if math.isfinite(value) else {"$float": repr(value)}


def _binary(value: bytes | bytearray) -> list[str]:
    return [type(value).__name__, base64.b64encode(value).decode()]


def _unbinary(value: list[str]) -> bytes | bytearray:
    data = base64.b64decode(value[1])
    return bytearray(data) if value[0] == "bytearray" else data


def _unfloat(value: Any) -> Any:
    return float(value["$float"]) if isinstance(value, dict) else value


def _kind(data_type: Any) -> tuple[Convert | None, Convert | None]:
    """Converters of one Spark type (None: the JSON value is the Python value)."""
    from pyspark.sql import types as t

    simple: dict[type, tuple[Convert | None, Convert | None]] = {
        t.DateType: (lambda d: d.isoformat(), datetime.date.fromisoformat),
        t.TimestampType: (lambda d: d.isoformat(), datetime.datetime.fromisoformat),
        t.DecimalType: (str, decimal.Decimal),
        # bytes in pyspark 4 (binaryAsBytes), bytearray in 3.5: each comes back as it was.
        t.BinaryType: (_binary, _unbinary),
        t.FloatType: (_float, _unfloat),
        t.DoubleType: (_float, _unfloat),
        t.DayTimeIntervalType: (
            lambda d: [d.days, d.seconds, d.microseconds],
            lambda v: datetime.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
        ),
    }
    ntz = getattr(t, "TimestampNTZType", None)
    if ntz is not None:
        simple[ntz] = simple[t.TimestampType]
    plain = (t.StringType, t.BooleanType, t.ByteType, t.ShortType, t.IntegerType, t.LongType, t.NullType)
    plain += tuple(
        getattr(t, name) for name in ("CharType", "VarcharType", "YearMonthIntervalType") if hasattr(t, name)
    )
    if isinstance(data_type, plain):
        return None, None
    for kind, converters in simple.items():
        if type(data_type) is kind:
            return converters
    if isinstance(data_type, t.StructType):
        return _struct(data_type)
    if isinstance(data_type, t.ArrayType):
        return _array(data_type)
    if isinstance(data_type, t.MapType):
        return _map(data_type)
    raise Unrecordable(f"a column of type {data_type.simpleString()}")


def _nullable(convert: Convert | None) -> Convert | None:
    if convert is None:
        return None
    return lambda value: None if value is None else convert(value)


def _struct(schema: Any) -> tuple[Convert, Convert]:
    from pyspark.sql.types import _create_row

    names = [field.name for field in schema.fields]
    pairs = [_kind(field.dataType) for field in schema.fields]
    encoders = [(i, _nullable(enc)) for i, (enc, _) in enumerate(pairs) if enc is not None]
    decoders = [(i, _nullable(dec)) for i, (_, dec) in enumerate(pairs) if dec is not None]

    def encode(row: Any) -> list[Any]:
        values = list(row)
        for i, convert in encoders:
            values[i] = convert(values[i])  # type: ignore[misc]  # not None by construction
        return values

    def decode(values: list[Any]) -> Any:
        for i, convert in decoders:
            values[i] = convert(values[i])  # type: ignore[misc]
        return _create_row(list(names), values)

    return encode, decode


def _array(data_type: Any) -> tuple[Convert, Convert]:
    enc, dec = (_nullable(c) for c in _kind(data_type.elementType))
    encode = (lambda items: [enc(x) for x in items]) if enc else list
    decode = (lambda items: [dec(x) for x in items]) if dec else list
    return encode, decode


def _map(data_type: Any) -> tuple[Convert, Convert]:
    key_enc, key_dec = (_nullable(c) for c in _kind(data_type.keyType))
    value_enc, value_dec = (_nullable(c) for c in _kind(data_type.valueType))

    def same(value: Any) -> Any:
        return value

    ke, kd, ve, vd = key_enc or same, key_dec or same, value_enc or same, value_dec or same
    # Pairs, not an object: a map's keys need not be strings. Tuples as keys come back as tuples.
    return (
        lambda mapping: [[ke(k), ve(v)] for k, v in mapping.items()],
        lambda pairs: {_hashable(kd(k)): vd(v) for k, v in pairs},
    )


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def encode_rows(rows: list[Any], schema: Any) -> list[list[Any]]:
    encode, _ = row_codec(schema)
    return [encode(row) for row in rows]


def decode_rows(data: list[list[Any]], schema: Any) -> list[Any]:
    _, decode = row_codec(schema)
    return [decode(values) for values in data]


# -- plain values ----------------------------------------------------------------------------------


def encode_value(value: Any) -> Any:
    """A plain Python value as JSON with tags; ``Unrecordable`` for what has no exact form here."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -_MAX_INT <= value < _MAX_INT else {"$int": str(value)}
    if isinstance(value, float):
        return _float(value)
    if type(value) is list:
        return [encode_value(item) for item in value]
    fields = getattr(value, "__fields__", None) if isinstance(value, tuple) else None
    if type(value).__name__ == "Row" and isinstance(value, tuple):
        return {"$row": [list(fields) if fields is not None else None, [encode_value(v) for v in value]]}
    if type(value) is tuple:
        return {"$tuple": [encode_value(item) for item in value]}
    if isinstance(value, collections.defaultdict):
        if value.default_factory is not int:  # countByKey's and countByValue's kind only
            raise Unrecordable(f"a defaultdict of {getattr(value.default_factory, '__name__', value.default_factory)}")
        return {"$counts": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if type(value) is dict:
        return {"$dict": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    encoded = _special(value)
    if encoded is None:
        raise Unrecordable(f"a value of type {type(value).__module__}.{type(value).__qualname__}")
    return encoded


def _special(value: Any) -> dict[str, Any] | None:
    if isinstance(value, datetime.datetime):  # before date: a datetime is a date
        return {"$datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"$date": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$" + type(value).__name__: base64.b64encode(value).decode()}
    if type(value).__name__ == "StatCounter" and type(value).__module__ == "pyspark.statcounter":
        # Its fields are numpy floats where numpy is installed: kept as floats (equal, and what
        # StatCounter computes with either way).
        fields = (value.mu, value.m2, value.maxValue, value.minValue)
        return {"$stats": [int(value.n), *(_float(float(field)) for field in fields)]}
    return None


def decode_value(data: Any) -> Any:
    if isinstance(data, list):
        return [decode_value(item) for item in data]
    if not isinstance(data, dict):
        return data
    ((tag, inner),) = data.items()
    decoder = _DECODERS.get(tag)
    if decoder is None:
        raise ValueError(f"unknown tag {tag!r} in a recorded result")
    return decoder(inner)


def _decode_row(inner: list[Any]) -> Any:
    from pyspark.sql.types import Row, _create_row

    fields, values = inner
    values = [decode_value(v) for v in values]
    return Row(*values) if fields is None else _create_row(fields, values)


def _decode_stats(inner: list[Any]) -> Any:
    from pyspark.statcounter import StatCounter

    stats = StatCounter()
    stats.n, stats.mu, stats.m2, stats.maxValue, stats.minValue = (
        inner[0],
        *(_unfloat(v) for v in inner[1:]),
    )
    return stats


def _decode_counts(inner: list[Any]) -> Any:
    counts: collections.defaultdict[Any, int] = collections.defaultdict(int)
    counts.update((decode_value(k), decode_value(v)) for k, v in inner)
    return counts


_DECODERS: dict[str, Convert] = {
    "$int": int,
    "$float": float,
    "$tuple": lambda inner: tuple(decode_value(v) for v in inner),
    "$dict": lambda inner: {decode_value(k): decode_value(v) for k, v in inner},
    "$counts": _decode_counts,
    "$row": _decode_row,
    "$datetime": datetime.datetime.fromisoformat,
    "$date": datetime.date.fromisoformat,
    "$decimal": decimal.Decimal,
    "$bytes": lambda s: base64.b64decode(s),
    "$bytearray": lambda s: bytearray(base64.b64decode(s)),
    "$stats": _decode_stats,
}
