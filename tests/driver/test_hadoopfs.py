"""Spark's data seen from the driver through Hadoop's FileSystem (driver/process/hadoopfs.py), on the test
session's JVM: a ``viewfs://`` mount over a local folder stands for a store that is not ``file:``."""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

from sparkrecover import jvm as jvm_names
from sparkrecover.driver.process import hadoopfs
from sparkrecover.driver.recording import writes
from sparkrecover.rundir import manifests, storage


@pytest.fixture
def mount(spark, tmp_path):
    """A fresh viewfs:// mount table whose fallback link is ``tmp_path/data``: its URL and folder."""
    name = f"t{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "data"
    folder.mkdir()
    spark._jsc.hadoopConfiguration().set(f"fs.viewfs.mounttable.{name}.linkFallback", f"file://{folder}")
    return f"viewfs://{name}", folder


@pytest.fixture
def served(spark):
    """Non-local data paths served through Hadoop, as the bootstrap does once a SparkContext exists."""
    hadoopfs.install(spark.sparkContext)
    yield
    storage.serve_data(None)


def write_tree(folder) -> None:
    (folder / "out" / "k=1").mkdir(parents=True)
    (folder / "out" / "_temporary" / "0").mkdir(parents=True)
    (folder / "out" / "part-0.parquet").write_bytes(b"PAR1" + b"x" * 100 + b"PAR1")
    (folder / "out" / "k=1" / "part-1.parquet").write_bytes(b"PAR1" + b"y" * 10 + b"PAR1")
    (folder / "out" / "_temporary" / "0" / "junk").write_bytes(b"z")
    (folder / "out" / "_SUCCESS").write_bytes(b"")


@pytest.mark.parametrize("through", ["HadoopListing", "Py4J"])
def test_listings_through_hadoop(spark, jvm, mount, monkeypatch, through):
    url, folder = mount
    write_tree(folder)
    if through == "Py4J":  # no jar loaded: the same answers, one Py4J call per file
        monkeypatch.setattr(hadoopfs, "find_class", lambda gateway, name: None)
    fs = hadoopfs.HadoopFileSystem(spark.sparkContext)
    out = f"{url}/out"
    assert sorted(fs.find(out)) == [
        f"{out}/{n}" for n in ("_SUCCESS", "_temporary/0/junk", "k=1/part-1.parquet", "part-0.parquet")
    ]
    assert fs.find(out, detail=True)[f"{out}/part-0.parquet"]["size"] == 108
    children = {entry["name"]: entry["type"] for entry in fs.ls(out)}
    assert children == {
        f"{out}/_SUCCESS": "file",
        f"{out}/_temporary": "directory",
        f"{out}/k=1": "directory",
        f"{out}/part-0.parquet": "file",
    }
    assert fs.info(f"{out}/part-0.parquet")["mtime"] == pytest.approx(
        os.path.getmtime(folder / "out" / "part-0.parquet"), abs=1
    )
    assert fs.exists(out) and not fs.exists(f"{url}/nothing")
    assert fs.find(f"{url}/nothing") == []
    with pytest.raises(FileNotFoundError):
        fs.info(f"{url}/nothing")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{url}/nothing")


def test_changes_and_reads_through_hadoop(spark, jvm, mount):
    url, folder = mount
    write_tree(folder)
    fs = hadoopfs.HadoopFileSystem(spark.sparkContext)
    fs.mv(f"{url}/out/k=1", f"{url}/moved")
    assert os.listdir(folder / "moved") == ["part-1.parquet"] and not (folder / "out" / "k=1").exists()
    with pytest.raises(OSError):  # FileNotFoundError here; a store that answers false: "could not rename"
        fs.mv(f"{url}/absent", f"{url}/elsewhere")
    fs.rm(f"{url}/out/_temporary", recursive=True)
    assert not (folder / "out" / "_temporary").exists()
    fs.makedirs(f"{url}/a/b", exist_ok=True)
    assert (folder / "a" / "b").is_dir()
    with fs.open(f"{url}/out/part-0.parquet", "rb") as handle:
        assert handle.read(4) == b"PAR1"
        handle.seek(104)
        assert handle.read() == b"PAR1"
    assert fs.cat_file(f"{url}/out/part-0.parquet") == (folder / "out" / "part-0.parquet").read_bytes()


def test_the_driver_records_data_without_a_python_backend(spark, jvm, mount, served):
    """A data path fsspec has no backend for (viewfs here, s3a without s3fs, hdfs without libhdfs)
    is listed, checked and cleaned through Hadoop; the manifest is the one fsspec would build."""
    url, folder = mount
    write_tree(folder)
    out = f"{url}/out"
    with pytest.raises(Exception, match="viewfs"):
        storage.filesystem(out)  # fsspec alone cannot
    assert storage.data_exists(out) and not storage.data_exists(f"{url}/nothing")
    built = manifests.build_output(out, out)
    local = manifests.build_output(str(folder / "out"))
    assert built["files"] == local["files"] and built["success"] is True and built["file_count"] == 2
    assert manifests.verify_output(built, "footer") == []
    assert storage.data_stat(f"{out}/part-0.parquet")[0] == 108
    (folder / "out" / "part-9.parquet").write_bytes(b"new")
    assert manifests.restore_output({"path": out, "files": local["files"], "success": True}) == [
        f"{out}/part-9.parquet"
    ]
    assert not (folder / "out" / "part-9.parquet").exists()


def test_the_listing_class_is_named_once(jvm):
    assert jvm_names.find_class(jvm, jvm_names.LISTING_CLASS) is not None


def test_undoing_a_new_append_spares_the_task_folders_kept_in_place(spark, mount, served):
    """An append that created its target and died before its job commit, on a store where a resume
    keeps the committed task folders in place (<target>/_temporary/0, as on S3): undoing the dead
    attempt removes everything else of the target and never those folders. It removed the whole
    target, and the resumed write then failed finding none of the partitions it kept (found on S3
    with an unmodified public script, data-algorithms-with-spark's partition_by_two_columns.py)."""
    url, folder = mount
    uuid_ = "5d6f73b8-2efb-4d8d-84fa-e34c67747fb7"
    task = folder / "out" / "_temporary" / "0" / "task_202611262244341234_0005_m_000001" / "k=A"
    task.mkdir(parents=True)
    kept = task / f"part-00001-{uuid_}.c000.snappy.parquet"
    kept.write_bytes(b"PAR1" + b"x" * 10 + b"PAR1")
    stray = folder / "out" / "k=B" / f"part-00002-{uuid_}.c000.snappy.parquet"
    stray.parent.mkdir()
    stray.write_bytes(b"PAR1" + b"y" * 10 + b"PAR1")
    entry = SimpleNamespace(restore=[{"path": f"{url}/out", "category": "append", "existed": False}], committed=None)
    removed = writes.undo_previous(None, entry, SimpleNamespace(spark=spark), spare_committed_tasks=True)
    assert kept.exists()
    assert not stray.exists() and not stray.parent.exists()
    assert removed == [f"{url}/out/k=B"]

    # Without folders kept in place (a local or HDFS target sets them aside), all of it goes.
    writes.undo_previous(None, entry, SimpleNamespace(spark=spark))
    assert not (folder / "out").exists()
