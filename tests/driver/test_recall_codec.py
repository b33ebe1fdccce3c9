"""Action results as typed JSON: every value comes back equal and of the same Python types, and
what the codec cannot represent exactly is refused rather than approximated (no Spark needed)."""

from __future__ import annotations

import collections
import datetime
import decimal
import math

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as t
from pyspark.statcounter import StatCounter

from sparkrecover.driver.recall import codec, recorder


def same(a, b) -> bool:
    """Equal, of the same types all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return (
            len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
            and (getattr(a, "__fields__", None) == getattr(b, "__fields__", None))
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def through_json(value):
    return codec.decode_value(orjson.loads(orjson.dumps(codec.encode_value(value))))


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.dates()
    | st.datetimes()
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers() | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_plain_values_come_back_equal_and_of_their_types(value):
    assert same(through_json(value), value)


def test_what_rdd_actions_return_comes_back_as_they_returned_it():
    counts = collections.defaultdict(int, {("a", 1): 2, "b": 3})
    back = through_json(counts)
    assert isinstance(back, collections.defaultdict) and back.default_factory is int
    assert dict(back) == dict(counts) and back["missing"] == 0  # a defaultdict still
    stats = StatCounter([1.0, 2.0, 4.0])
    again = through_json(stats)
    assert isinstance(again, StatCounter)
    assert (again.count(), again.mean(), again.stdev(), again.max(), again.min()) == (
        stats.count(),
        stats.mean(),
        stats.stdev(),
        stats.max(),
        stats.min(),
    )
    row = t.Row(name="a", n=1)
    assert same(through_json([row, (1, "x")]), [row, (1, "x")])


def test_a_value_of_a_class_it_does_not_know_is_refused_with_its_name():
    class Point:
        pass

    with pytest.raises(codec.Unrecordable, match="Point"):
        codec.encode_value([1, Point()])
    with pytest.raises(codec.Unrecordable, match="defaultdict of list"):
        codec.encode_value(collections.defaultdict(list))


SCHEMA = t.StructType(
    [
        t.StructField("id", t.LongType()),
        t.StructField("day", t.DateType()),
        t.StructField("at", t.TimestampType()),
        t.StructField("amount", t.DecimalType(10, 2)),
        t.StructField("blob", t.BinaryType()),
        t.StructField("score", t.DoubleType()),
        t.StructField("tags", t.ArrayType(t.StringType())),
        t.StructField("by_day", t.MapType(t.DateType(), t.IntegerType())),
        t.StructField("inner", t.StructType([t.StructField("x", t.FloatType()), t.StructField("y", t.StringType())])),
        t.StructField("gap", t.DayTimeIntervalType()),
    ]
)


def test_rows_come_back_as_collect_builds_them_through_the_result_file():
    from pyspark.sql.types import _create_row

    inner = _create_row(["x", "y"], [float("nan"), None])
    rows = [
        _create_row(
            SCHEMA.names,
            [
                1,
                datetime.date(2026, 11, 28),
                datetime.datetime(2026, 11, 28, 1, 2, 3, 456789),
                decimal.Decimal("12.30"),
                bytearray(b"\x00\xff"),
                float("-inf"),
                ["a", None],
                {datetime.date(2026, 1, 1): 3},
                inner,
                datetime.timedelta(days=1, microseconds=5),
            ],
        ),
        _create_row(SCHEMA.names, [None] * len(SCHEMA.names)),
    ]
    encoded = recorder.encode(recorder.ROWS, rows, SCHEMA, limit=1 << 20)
    import hashlib

    shape, back = recorder.decode(encoded.data, hashlib.sha256(encoded.data).hexdigest(), "test")
    assert shape == recorder.ROWS and encoded.rows == 2
    assert same(back, rows)
    assert back[0].inner.y is None and back[0]["tags"] == ["a", None]


def test_a_result_over_the_limit_is_refused_before_it_is_all_encoded():
    schema = t.StructType([t.StructField("text", t.StringType())])
    rows = [t.Row(text="x" * 100)] * 100_000
    with pytest.raises(recorder.OverLimit, match=r"result of more than .* over the 64\.0 KiB limit"):
        recorder.encode(recorder.ROWS, rows, schema, limit=64 << 10)


def test_a_result_file_that_does_not_match_its_digest_is_refused():
    encoded = recorder.encode(recorder.VALUE, 42, None, limit=1 << 20)
    with pytest.raises(ValueError, match="does not match the digest"):
        recorder.decode(encoded.data, "0" * 64, "results/0001/000001.json")


def test_a_column_type_without_an_exact_form_is_refused():
    from pyspark.ml.linalg import VectorUDT

    schema = t.StructType([t.StructField("v", VectorUDT())])
    with pytest.raises(codec.Unrecordable, match="vector"):
        codec.row_codec(schema)
