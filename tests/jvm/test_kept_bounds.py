"""A range shuffle's bounds kept beside its map outputs (sparkrecover/jvm/shuffle/KeptBounds.java), in the
shared session: the first registration of an identity saves the bounds it sampled, every later
one partitions by the saved bounds, and bounds that cannot be read or would give another
partition count are refused (the shuffle then runs again, unkept). The end-to-end case, a write
after a sort killed and resumed, is tests/e2e/test_range_shuffle.py."""

from __future__ import annotations

import hashlib
import os
import struct

import pytest

from sparkrecover.jvm import find_class

HEADER = b"sparkrecover-range-bounds v1\n"
PARTITIONS = 4


@pytest.fixture
def bounds(jvm):
    found = find_class(jvm, "sparkrecover.jvm.shuffle.KeptBounds")
    assert found is not None
    return found


def map_side(spark):
    """The map side of a new range shuffle (its partitioner sampled now, seeded by new RDD ids):
    2,000 rows in 4 partitions, more than Spark samples of each, so the bounds depend on the seed."""
    previous = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # the exchange is planned at once
    try:
        frame = spark.range(0, 2000, numPartitions=4).selectExpr("id * 7919 % 2000 AS k")
        rdd = frame.repartitionByRange(PARTITIONS, "k")._jdf.queryExecution().toRdd()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", previous)
    while True:
        dependency = rdd.dependencies().head()
        if dependency.getClass().getSimpleName() == "ShuffleDependency":
            return dependency.rdd()
        rdd = dependency.rdd()


def rows_of(saved: bytes) -> list[bytes]:
    """The bounds of a bounds file, each as its field count, length and bytes."""
    assert saved[: len(HEADER)] == HEADER and hashlib.sha256(saved[:-32]).digest() == saved[-32:]
    (count,) = struct.unpack(">i", saved[len(HEADER) : len(HEADER) + 4])
    at, rows = len(HEADER) + 4, []
    for _ in range(count):
        _fields, length = struct.unpack(">ii", saved[at : at + 8])
        rows.append(saved[at : at + 8 + length])
        at += 8 + length
    assert at == len(saved) - 32
    return rows


def bounds_file(rows: list[bytes]) -> bytes:
    payload = HEADER + struct.pack(">i", len(rows)) + b"".join(rows)
    return payload + hashlib.sha256(payload).digest()


def test_the_first_registration_saves_its_bounds_and_every_later_one_uses_them(spark, bounds, tmp_path):
    keep = str(tmp_path / "shuffles")
    used, sampled = bounds.applyTo(keep, "ident", map_side(spark)).split()
    assert used == sampled
    saved = (tmp_path / "shuffles" / "ident" / "bounds").read_bytes()
    assert len(rows_of(saved)) == PARTITIONS - 1

    again = map_side(spark)
    used_again = bounds.applyTo(keep, "ident", again).split()[0]
    assert used_again == used  # the saved bounds, whatever this sample gave
    assert (tmp_path / "shuffles" / "ident" / "bounds").read_bytes() == saved  # never overwritten
    # The partitioner now holds the saved bounds: read again, its own are the saved ones.
    assert bounds.applyTo(keep, "ident", again).split() == [used, used]
    assert bounds.applyTo(keep, "other", map_side(spark)).split()[0] != "refused:"


def test_saved_bounds_that_give_another_partition_count_are_refused(spark, bounds, tmp_path):
    keep = str(tmp_path / "shuffles")
    assert not bounds.applyTo(keep, "ident", map_side(spark)).startswith("refused")
    path = tmp_path / "shuffles" / "ident" / "bounds"
    path.write_bytes(bounds_file(rows_of(path.read_bytes())[:-1]))
    refused = bounds.applyTo(keep, "ident", map_side(spark))
    assert refused == (
        f"refused: its kept range bounds give {PARTITIONS - 1} partitions, this application's sample "
        f"{PARTITIONS}: the map stage runs again, unkept"
    )


def test_saved_bounds_that_cannot_be_read_are_refused(spark, bounds, tmp_path):
    keep = str(tmp_path / "shuffles")
    assert not bounds.applyTo(keep, "ident", map_side(spark)).startswith("refused")
    path = tmp_path / "shuffles" / "ident" / "bounds"
    torn = path.read_bytes()[:-5]
    path.write_bytes(torn)
    refused = bounds.applyTo(keep, "ident", map_side(spark))
    assert refused.startswith("refused: its kept range bounds cannot be read (the bounds file does not match its")
    assert path.read_bytes() == torn  # left as it is: no identity gets a second set of bounds


def test_bounds_that_cannot_be_saved_are_refused(spark, bounds, tmp_path):
    (tmp_path / "shuffles").write_text("a file where the keep folder should be")
    refused = bounds.applyTo(str(tmp_path / "shuffles"), "ident", map_side(spark))
    assert refused.startswith("refused: its range bounds could not be saved or read in the keep folder")
    assert os.path.isfile(tmp_path / "shuffles")


def test_map_outputs_kept_without_their_bounds_are_refused_and_no_new_bounds_are_saved(spark, bounds, tmp_path):
    """Saving this sample would let later attempts mix its map outputs with the kept ones."""
    kept = tmp_path / "shuffles" / "ident" / "map-0-t1-aaaa"
    kept.mkdir(parents=True)
    (kept / "data").write_bytes(b"rows partitioned by bounds now lost")
    refused = bounds.applyTo(str(tmp_path / "shuffles"), "ident", map_side(spark))
    assert refused == (
        "refused: the range bounds its kept map outputs were partitioned by are missing from the keep folder: "
        "the map stage runs again, unkept"
    )
    assert not (tmp_path / "shuffles" / "ident" / "bounds").exists()
