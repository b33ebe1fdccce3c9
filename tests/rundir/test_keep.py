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


def test_a_run_directory_on_another_store_keeps_nothing():
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


def test_removing_a_keep_folder_that_kept_no_map_output_says_nothing_was_removed(tmp_path):
    """submit makes the folder before every attempt: a run whose shuffles kept nothing (none, or
    all refused) must not be told its kept map outputs were removed."""
    run_dir = str(tmp_path / "run")
    keep.create(run_dir)
    (tmp_path / "run" / "shuffles" / "reuse-2.tsv").write_text("")  # a reuse list, no map output
    (tmp_path / "run" / "shuffles" / "abc").mkdir()  # a shuffle that kept none of its maps
    assert not keep.remove(run_dir)
    assert not os.path.exists(tmp_path / "run" / "shuffles")  # the folder goes all the same
