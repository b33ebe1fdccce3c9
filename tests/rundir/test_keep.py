"""The keep folder's lifecycle: created, measured, read by the planner, removed."""

from __future__ import annotations

import os

from sparkrecover.rundir import keep


def test_a_local_run_directory_has_a_keep_folder_made_on_demand(tmp_path):
    run_dir = str(tmp_path / "run")
    assert keep.folder(run_dir) == str(tmp_path / "run" / "shuffles")
    assert not os.path.exists(keep.folder(run_dir) or "")
    assert keep.create(run_dir) == keep.folder(run_dir) and os.path.isdir(keep.folder(run_dir) or "")
    assert keep.create(run_dir) == keep.folder(run_dir)  # again: no error


def test_a_run_directory_spark_cannot_reach_keeps_nothing():
    assert keep.folder("memory://runs/night") is None
    assert keep.create("memory://runs/night") is None
    assert keep.size_reader("memory://runs/night") is None
    assert keep.disk_usage("memory://runs/night") is None
    assert not keep.remove("memory://runs/night")


def test_disk_usage_counts_each_linked_file_once_and_removal_takes_the_folder(tmp_path):
    run_dir = str(tmp_path / "run")
    folder = tmp_path / "run" / "shuffles" / "abc" / "map-0"
    folder.mkdir(parents=True)
    (folder / "data").write_bytes(b"x" * 1000)
    os.link(folder / "data", tmp_path / "run" / "shuffles" / "linked")
    assert keep.disk_usage(run_dir) == 1000
    assert keep.remove(run_dir) and keep.disk_usage(run_dir) is None
    assert not keep.remove(run_dir)


def test_the_size_reader_sees_kept_files_and_their_loss(tmp_path):
    run_dir = str(tmp_path / "run")
    (tmp_path / "run" / "shuffles" / "abc").mkdir(parents=True)
    (tmp_path / "run" / "shuffles" / "abc" / "data").write_bytes(b"x" * 7)
    size = keep.size_reader(run_dir)
    assert size is not None
    assert size("abc/data") == 7
    assert size("abc/index") is None
    keep.remove(run_dir)
    assert size("abc/data") is None


def write(fs, path: str, size: int) -> None:
    with fs.open(path, "wb") as handle:
        handle.write(b"x" * size)


def test_a_keep_folder_on_s3_is_listed_once_measured_and_removed(s3):
    import fsspec

    run_dir = s3.prefix + "/night"
    assert keep.folder(run_dir) == run_dir + "/shuffles" and keep.create(run_dir) == run_dir + "/shuffles"
    assert keep.disk_usage(run_dir) is None and not keep.remove(run_dir)
    fs = fsspec.filesystem("s3")
    base = run_dir[len("s3://") :] + "/shuffles/abc/map-0-t3-1f2e3d4c"
    write(fs, base + "/data", 700)
    write(fs, base + "/index", 24)
    write(fs, base + "/meta", 50)
    size = keep.size_reader(run_dir)
    assert size is not None
    assert (size("abc/map-0-t3-1f2e3d4c/data"), size("abc/map-0-t3-1f2e3d4c/index")) == (700, 24)
    assert size("abc/map-1-t4-1f2e3d4c/data") is None
    assert keep.disk_usage(run_dir) == 774
    assert keep.remove(run_dir) and keep.disk_usage(run_dir) is None


def test_the_sweep_removes_what_no_record_names_on_every_store(tmp_path, s3):
    import fsspec

    local = str(tmp_path / "run")
    for name in ("map-0-t1-aaaaaaaa", "map-1-t2-bbbbbbbb", ".tmp-2-9"):
        (tmp_path / "run" / "shuffles" / "abc" / name).mkdir(parents=True)
        (tmp_path / "run" / "shuffles" / "abc" / name / "data").write_bytes(b"x")
    (tmp_path / "run" / "shuffles" / ".fallback" / "app-1").mkdir(parents=True)  # an older layout
    (tmp_path / "run" / "shuffles" / "reuse-0002.tsv").write_text("")
    (tmp_path / "run" / "shuffles" / "abc" / "bounds").write_bytes(b"b")  # a range partitioning's
    swept = keep.sweep(local, ["abc/map-0-t1-aaaaaaaa"])
    assert sorted(swept) == [".fallback", "abc/.tmp-2-9", "abc/map-1-t2-bbbbbbbb"]
    assert sorted(os.listdir(tmp_path / "run" / "shuffles" / "abc")) == ["bounds", "map-0-t1-aaaaaaaa"]
    assert (tmp_path / "run" / "shuffles" / "reuse-0002.tsv").exists()
    assert keep.sweep(local, ["abc/map-0-t1-aaaaaaaa"]) == []

    remote = s3.prefix + "/night"
    fs = fsspec.filesystem("s3")
    base = remote[len("s3://") :] + "/shuffles"
    for name in ("map-0-t1-aaaaaaaa", "map-1-t2-bbbbbbbb"):
        write(fs, f"{base}/abc/{name}/data", 10)
        write(fs, f"{base}/abc/{name}/index", 16)
    write(fs, f"{base}/reuse-0002.tsv", 3)
    write(fs, f"{base}/abc/bounds", 5)
    assert keep.sweep(remote, ["abc/map-0-t1-aaaaaaaa"]) == ["abc/map-1-t2-bbbbbbbb"]
    fs.invalidate_cache()
    assert sorted(path[len(base) + 1 :] for path in fs.find(base + "/abc")) == [
        "abc/bounds",
        "abc/map-0-t1-aaaaaaaa/data",
        "abc/map-0-t1-aaaaaaaa/index",
    ]
    assert keep.size_reader(remote)("reuse-0002.tsv") == 3  # type: ignore[misc]


def test_removing_a_keep_folder_that_kept_no_map_output_says_nothing_was_removed(tmp_path):
    """submit makes the folder before every attempt: a run whose shuffles kept nothing (none, or
    all refused) must not be told its kept map outputs were removed."""
    run_dir = str(tmp_path / "run")
    keep.create(run_dir)
    (tmp_path / "run" / "shuffles" / "reuse-2.tsv").write_text("")  # a reuse list, no map output
    (tmp_path / "run" / "shuffles" / "abc").mkdir()  # a shuffle that kept none of its maps
    assert not keep.remove(run_dir)
    assert not os.path.exists(tmp_path / "run" / "shuffles")  # the folder goes all the same
