"""Spark's data seen from the driver through Hadoop's FileSystem (driver/hadoopfs.py), on the test
session's JVM: a ``viewfs://`` mount over a local folder stands for a store that is not ``file:``."""

from __future__ import annotations

import os
import uuid

import pytest

from sparkrecover import jvm as jvm_names
from sparkrecover.driver import hadoopfs
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
