"""Spark's data seen from the driver through Hadoop's FileSystem, the client Spark wrote it with
(docs/decisions/0012-hadoop-filesystem-in-the-driver.md).

A path Spark reads or writes may live where the driver's Python has no backend (``s3a://`` without
s3fs, ``hdfs://`` without libhdfs, ``viewfs://``, ``abfs://``), and its endpoint and credentials are
Spark's settings (``fs.s3a.endpoint``, an instance role's provider), which fsspec does not read.
Hadoop's FileSystem in the driver's JVM reaches every path Spark can write, with those settings.
``install`` makes ``rundir/storage.py`` serve every non-local data path through it
(``storage.data_filesystem``); the journal, plans and lease stay on fsspec (they must work before
and without a SparkContext). ``HadoopFileSystem`` speaks fsspec's interface, so the manifests, the
cleanup of a write and the committer's evidence (``rundir/taskfiles.py``) need not know which
client they talk to. Listings go through ``HadoopListing`` (one Py4J call per listing) when the
package's jar is loaded, else through Py4J file by file.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Collection, Iterator
from typing import Any

import orjson
from fsspec.spec import AbstractFileSystem

from sparkrecover.jvm import LISTING_CLASS, find_class
from sparkrecover.rundir import storage


def install(sc: Any) -> None:
    """Serve non-local data paths through Hadoop's FileSystem of the driver ``sc`` runs in."""
    storage.serve_data(lambda url: (HadoopFileSystem(sc), storage.to_spark_path(url)))


class HadoopFileSystem(AbstractFileSystem):
    """fsspec's interface over Hadoop's FileSystem, for paths as Spark names them (``s3a://b/k``,
    ``hdfs://nn/x``). Only what sparkrecover uses: listing, status, delete, rename, mkdirs, reads."""

    protocol = "sparkrecover-hadoop"  # never registered: instances come from ``install``
    cachable = False  # it holds a Py4J gateway

    def __init__(self, sc: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self._sc = sc
        self._conf: Any = None

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        return str(path).rstrip("/") if not str(path).endswith("://") else str(path)

    # -- the JVM -------------------------------------------------------------------------------

    def _hadoop_conf(self) -> Any:
        """The session's Hadoop configuration (the SparkContext's plus every SQL setting, as a
        write's job sees it), else the SparkContext's."""
        if self._conf is None:
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
            jsession = getattr(session, "_jsparkSession", None)
            self._conf = (
                jsession.sessionState().newHadoopConf() if jsession is not None else self._sc._jsc.hadoopConfiguration()
            )
        return self._conf

    def _target(self, path: str) -> tuple[Any, Any]:
        """(Hadoop FileSystem, Hadoop Path) of ``path``."""
        hpath = self._sc._jvm.org.apache.hadoop.fs.Path(self._strip_protocol(path))
        return hpath.getFileSystem(self._hadoop_conf()), hpath

    # -- reading -------------------------------------------------------------------------------

    def _listing(self, path: str, recursive: bool) -> list[tuple[str, int, int, bool]] | None:
        """(relative name, size, mtime ms, is a directory) below ``path``; None when it is absent."""
        path = self._strip_protocol(path)
        with _java_errors(path):
            fs, hpath = self._target(path)
            helper = find_class(self._sc._jvm, LISTING_CLASS)
            if helper is not None:
                return orjson.loads(str(helper.list(fs, hpath, recursive)))
            return _listing_through_py4j(fs, hpath, recursive)

    def _entries(self, path: str, recursive: bool) -> list[dict[str, Any]]:
        path = self._strip_protocol(path)
        found = self._listing(path, recursive)
        if found is None:
            raise FileNotFoundError(path)
        return [
            {
                "name": f"{path}/{name}" if name else path,
                "size": size,
                "type": "directory" if is_dir else "file",
                "mtime": mtime / 1000.0,
            }
            for name, size, mtime, is_dir in found
        ]

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        entries = self._entries(path, recursive=False)
        return entries if detail else [entry["name"] for entry in entries]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any):
        if maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        try:
            entries = self._entries(path, recursive=True)
        except FileNotFoundError:
            entries = []
        found = {entry["name"]: entry for entry in entries if entry["type"] == "file"}
        return found if detail else sorted(found)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        with _java_errors(path):
            fs, hpath = self._target(path)
            status = fs.getFileStatus(hpath)
            return {
                "name": path,
                "size": int(status.getLen()),
                "type": "directory" if status.isDirectory() else "file",
                "mtime": int(status.getModificationTime()) / 1000.0,
            }

    def exists(self, path: str, **kwargs: Any) -> bool:
        path = self._strip_protocol(path)
        with _java_errors(path):
            fs, hpath = self._target(path)
            return bool(fs.exists(hpath))

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> io.RawIOBase:
        if mode != "rb":
            raise NotImplementedError("sparkrecover only reads data files through Hadoop")
        path = self._strip_protocol(path)
        with _java_errors(path):
            fs, hpath = self._target(path)
            return _HadoopReader(path, fs.open(hpath))

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        with self._open(path) as handle:
            if start:
                handle.seek(start)
            return handle.read(-1 if end is None else end - (start or 0))

    def invalidate_cache(self, path: str | None = None) -> None:
        pass  # nothing cached: every call asks Hadoop (whose own caches are Spark's)

    # -- changing ------------------------------------------------------------------------------

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        for one in [path] if isinstance(path, str) else list(path):
            one = self._strip_protocol(one)
            with _java_errors(one):
                fs, hpath = self._target(one)
                fs.delete(hpath, bool(recursive))

    def mv(self, path1: str, path2: str, recursive: bool = True, maxdepth: int | None = None, **kwargs: Any) -> None:
        """Hadoop's rename: atomic on HDFS and local folders, a copy and a delete of each file on
        an object store."""
        source, destination = self._strip_protocol(path1), self._strip_protocol(path2)
        with _java_errors(source):
            fs, hsource = self._target(source)
            _, hdestination = self._target(destination)
            if not fs.rename(hsource, hdestination):
                raise OSError(f"could not rename {source} to {destination}")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        with _java_errors(path):
            fs, hpath = self._target(path)
            fs.mkdirs(hpath)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.makedirs(path, exist_ok=True)

    def uploads(self, path: str) -> list[tuple[str, str]]:
        """The incomplete multipart uploads below the folder ``path`` on S3 (s3a), as (key, upload
        id), listed with S3A's own call (the prefix ends in ``/``, so a sibling ``out2`` is spared).
        Other stores have none: []."""
        path = self._strip_protocol(path)
        if not path.startswith("s3a://"):
            return []
        with _java_errors(path):
            fs, hpath = self._target(path)
            key = str(hpath.toUri().getPath()).strip("/") + "/"
            return [_upload_of(u) for u in fs.listMultipartUploads(key)]

    def abort_uploads(self, path: str, spare: Collection[tuple[str, str]] = ()) -> int:
        """Abort every incomplete multipart upload below the folder ``path`` on S3 (s3a) but those
        in ``spare`` (key, upload id), and say how many: a task killed while it wrote a large file
        leaves one, invisible, billed until aborted, and nothing will ever complete it (``spare``:
        the uploads of committed tasks' pendingsets, which a resumed write completes). Aborted
        through Hadoop's public MultipartUploader. Other stores have none to abort: 0."""
        spared = set(spare)
        doomed = [upload for upload in self.uploads(path) if upload not in spared]
        if not doomed:
            return 0
        path = self._strip_protocol(path)
        jvm = self._sc._jvm
        with _java_errors(path):
            fs, hpath = self._target(path)
            bucket = f"s3a://{hpath.toUri().getAuthority()}/"
            uploader = fs.createMultipartUploader(jvm.org.apache.hadoop.fs.Path(bucket)).build()
            handle_of = getattr(jvm.org.apache.hadoop.fs.BBUploadHandle, "from")
            for upload_key, upload_id in doomed:
                handle = handle_of(jvm.java.nio.ByteBuffer.wrap(bytearray(upload_id.encode())))
                uploader.abort(handle, jvm.org.apache.hadoop.fs.Path(bucket + upload_key)).get()
        return len(doomed)


class _HadoopReader(io.RawIOBase):
    """A Hadoop input stream read through Py4J (``readNBytes`` hands Python a byte[] in one call)."""

    def __init__(self, path: str, stream: Any):
        self.path, self._stream, self._position = path, stream, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET:
            raise io.UnsupportedOperation("only absolute seeks")
        with _java_errors(self.path):
            self._stream.seek(offset)
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        chunks = []
        wanted = (1 << 62) if size is None or size < 0 else size
        while wanted > 0:
            with _java_errors(self.path):
                chunk = bytes(self._stream.readNBytes(min(wanted, 8 << 20)))
            if not chunk:
                break
            chunks.append(chunk)
            self._position += len(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._stream.close()
        super().close()


def _listing_through_py4j(fs: Any, hpath: Any, recursive: bool) -> list[tuple[str, int, int, bool]] | None:
    """What ``HadoopListing.list`` answers, one Py4J call per file (no jar loaded)."""
    if not fs.exists(hpath):
        return None
    top = fs.getFileStatus(hpath)
    if not top.isDirectory():
        return [("", int(top.getLen()), int(top.getModificationTime()), False)]
    base = str(top.getPath().toUri().getPath()).rstrip("/") + "/"

    def entry(status: Any) -> tuple[str, int, int, bool]:
        name = str(status.getPath().toUri().getPath())
        return (name[len(base) :] if name.startswith(base) else name, int(status.getLen()),
                int(status.getModificationTime()), bool(status.isDirectory()))  # fmt: skip

    if not recursive:
        return [entry(status) for status in fs.listStatus(top.getPath())]
    found = []
    files = fs.listFiles(top.getPath(), True)
    while files.hasNext():
        found.append(entry(files.next()))
    return found


def _upload_of(upload: Any) -> tuple[str, str]:
    """(key, upload id) of an S3A multipart upload: AWS SDK v1's (hadoop-aws 3.3) or v2's (3.4)."""
    from py4j.protocol import Py4JError

    try:
        return str(upload.getKey()), str(upload.getUploadId())
    except Py4JError:
        return str(upload.key()), str(upload.uploadId())


@contextlib.contextmanager
def _java_errors(path: str) -> Iterator[None]:
    """Hadoop's exceptions as Python's: a missing path is FileNotFoundError, any other failure of
    the store an OSError with the first line of Hadoop's message (a call Py4J cannot make too)."""
    from py4j.protocol import Py4JError, Py4JJavaError

    try:
        yield
    except Py4JJavaError as error:
        java = error.java_exception
        kind = str(java.getClass().getName())
        message = str(java.getMessage() or kind).strip().splitlines()
        first = message[0][:300] if message else kind
        if kind == "java.io.FileNotFoundException":
            raise FileNotFoundError(f"{path}: {first}") from None
        raise OSError(f"{path}: {kind.rsplit('.', 1)[-1]}: {first}") from None
    except Py4JError as error:  # not a Java exception: a method this Hadoop does not have
        raise OSError(
            f"{path}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else 'Py4JError'}"
        ) from None
