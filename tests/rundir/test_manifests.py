"""Output manifests: large ones kept in a file, restoring an output, and the verification levels."""

from __future__ import annotations

import os

import orjson
import pytest

from sparkrecover.rundir import manifests
from tests.journals import make_output


def test_large_manifests_go_to_a_file_and_are_verified_through_it(run):
    files = {f"part-{i:05d}.parquet": b"x" for i in range(manifests.INLINE_FILE_LIMIT + 1)}
    run.done("big", files=files).done("small").end(0)
    committed = run.state().stages["big"].committed
    assert committed["manifest_ref"] == "manifests/big.json"
    assert "files" not in committed["manifest"][0]
    assert committed["manifest"][0]["file_count"] == manifests.INLINE_FILE_LIMIT + 1
    assert run.state().stages["small"].committed["manifest_ref"] is None
    stored = orjson.loads(open(os.path.join(run.dir, "manifests", "big.json"), "rb").read())
    assert stored["stage"] == "big" and len(stored["outputs"][0]["files"]) == manifests.INLINE_FILE_LIMIT + 1
    assert run.plan()["big"][0] == "skip"
    os.remove(os.path.join(run.outputs["big"], "part-00500.parquet"))
    assert run.plan()["big"] == ("lost", f"output lost: {run.outputs['big']}/part-00500.parquet is missing")


def test_exactly_inline_file_limit_files_stay_inline(tmp_path):
    folder = make_output(tmp_path / "out", {f"p{i}": b"" for i in range(manifests.INLINE_FILE_LIMIT)})
    manifest = [manifests.build_output(folder)]
    assert manifests.externalize("s", manifest, str(tmp_path / "run")) == (manifest, None, None)


@pytest.mark.parametrize("tamper", ["rewrite", "delete"])
def test_a_rewritten_or_missing_manifest_file_is_not_skippable(run, tamper):
    files = {f"part-{i:05d}": b"x" for i in range(manifests.INLINE_FILE_LIMIT + 1)}
    run.done("big", files=files).end(0)
    path = os.path.join(run.dir, "manifests", "big.json")
    if tamper == "rewrite":  # a later, unfinished attempt rewrote it: same files, other bytes
        document = orjson.loads(open(path, "rb").read())
        with open(path, "wb") as handle:
            handle.write(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    else:
        os.remove(path)
    assert run.plan()["big"] == ("lost", "output lost: the manifest recorded for big is missing or was rewritten")


def test_restore_output_removes_what_appeared_after_before(tmp_path):
    folder = make_output(tmp_path / "out", {"part-0": b"old"}, success=False)
    before = manifests.build_output(folder)
    make_output(folder, {"part-1": b"new"}, success=True)
    removed = manifests.restore_output(before)
    assert removed == [os.path.join(folder, "part-1")]
    assert sorted(os.listdir(folder)) == ["part-0"]
    assert manifests.restore_output(manifests.build_output(str(tmp_path / "absent"))) == []


def _damage_keeping_size(path: str, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)


@pytest.mark.parametrize(
    "level, damage, found",
    [
        ("size", b"XXXX", None),
        ("footer", b"XXXX", "has a damaged Parquet header or footer"),
        ("footer", b"PAR1yy", None),
        ("checksum", b"PAR1yy", "changed content (checksum differs)"),
    ],
)
def test_verification_levels_see_what_they_promise(tmp_path, level, damage, found):
    output = make_output(tmp_path / "out")
    recorded = manifests.build_output(output, checksums=True)
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), damage)
    problems = manifests.verify_output(recorded, level)
    if found is None:
        assert problems == []
    else:
        assert problems == [f"{output}/part-00000.parquet {found}"]


def test_checksum_level_falls_back_to_footers_without_recorded_digests(tmp_path):
    output = make_output(tmp_path / "out")
    recorded = manifests.build_output(output)
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), b"PAR1yy")
    assert manifests.verify_output(recorded, "checksum") == []
    _damage_keeping_size(os.path.join(output, "part-00000.parquet"), b"XXXX")
    assert manifests.verify_output(recorded, "checksum") == [
        f"{output}/part-00000.parquet has a damaged Parquet header or footer"
    ]
