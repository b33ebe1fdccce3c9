"""Where things live: fsspec URLs for the journal and outputs, and Spark's names for them.

The CLI and the journal speak fsspec (``/abs/path``, ``s3://``, ``memory://``); Spark speaks
Hadoop (``file:/abs/path``, ``s3a://``). Every URL crossing that border goes through
``to_spark_path`` or ``from_spark_path`` so both sides look at the same place.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Callable, Iterator
from typing import Any

from sparkrecover.errors import StorageError, UsageError

ROOT_ENV = "SPARKRECOVER_ROOT"
DEFAULT_ROOT = ".sparkrecover"

# Hadoop scheme -> fsspec protocol, for object stores Spark reaches through hadoop-aws & co.
_HADOOP_TO_FSSPEC = {"s3a": "s3", "s3n": "s3", "gs": "gs", "abfs": "abfs", "abfss": "abfs"}
_FSSPEC_TO_HADOOP = {"s3": "s3a"}


def scheme_of(url: str) -> str:
    head, sep, _ = url.partition("://")
    if sep and head.isidentifier():
        return head
    if url.startswith("file:"):
        return "file"
    return ""


def is_local(url: str) -> bool:
    return scheme_of(url) in ("", "file", "local")


def normalize(url: str, cwd: str | None = None) -> str:
    """An fsspec URL for ``url``: local paths become absolute, ``file:`` is dropped."""
    scheme = scheme_of(url)
    if scheme in ("", "file", "local"):
        path = url
        if scheme:
            path = url.split(":", 1)[1]
            while path.startswith("//"):
                path = path[1:]
        if not os.path.isabs(path):
            path = os.path.join(cwd or os.getcwd(), path)
        return os.path.normpath(path)
    return url.rstrip("/")


def resolve_root(root: str | None) -> str:
    """--root, else $SPARKRECOVER_ROOT, else ./.sparkrecover (docs/design.md §2); a local root that is,
    or lies under, a regular file is a usage error here, before any command reads or writes."""
    if root is not None and not root.strip():
        # A shell variable that was never set (`--root "$ROOT"`): running under ./.sparkrecover
        # instead would launch the whole job where nobody will look for it.
        raise UsageError("--root is empty: give a folder or URL, or leave --root out for the default")
    given = root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    url = normalize(given)
    if is_local(url) and not _can_be_folder(url):
        source = f"--root {root}" if root else f"${ROOT_ENV}" if os.environ.get(ROOT_ENV) else "the default root"
        raise UsageError(f"the root {url} is not a folder ({source})")
    return url


def _can_be_folder(path: str) -> bool:
    """Whether ``path`` is a folder or could be made one: its nearest existing ancestor is a folder.
    Only the local disk is looked at: an object store has no files in the way of a prefix, and
    TAB completion must never wait on the network."""
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent
    return os.path.isdir(path)


def make_folder(url: str) -> None:
    """Create a local folder (and its parents); one line and exit 3 when the disk says no. An
    object store has no folders to make: its first write makes the prefix."""
    if not is_local(url):
        return
    path = normalize(url)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot create {path}: {error.strerror or error}") from None


def join(url: str, *parts: str) -> str:
    if is_local(url):
        return os.path.join(url, *parts)
    return posixpath.join(url, *parts)


# The package that gives fsspec each protocol, for a useful message when it is missing.
_BACKENDS = {
    "s3": "s3fs (pip install s3fs)",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "az": "adlfs",
    "hdfs": "pyarrow",
}
# Backends that also need a native client: pyarrow's HDFS loads libhdfs and a JVM.
_CLIENT_LIBRARIES = {
    "hdfs": "a Hadoop client and pyarrow (pip install pyarrow; HADOOP_HOME with "
    "lib/native/libhdfs.so, JAVA_HOME, CLASSPATH=$(hadoop classpath --glob))"
}


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path inside it. fsspec is imported here, late.

    Credentials and endpoints come from where each backend looks for them (for S3: the AWS
    credential chain, ``AWS_ENDPOINT_URL``, fsspec's configuration), never from the run.
    """
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url)
    except ImportError as error:
        raise StorageError(unreachable(url, error)) from None
    except ValueError as error:  # an unknown protocol
        raise UsageError(f"{url}: {error}") from None
    except OSError as error:
        if scheme_of(url) in _CLIENT_LIBRARIES:  # pyarrow could not load libhdfs or the JVM
            raise StorageError(unreachable(url, error)) from None
        raise


def unreachable(url: str, error: BaseException) -> str:
    """One line: the filesystem of ``url`` cannot be reached from here, and what to install.
    The backend's own message (pyarrow's lists every ``dlopen`` it tried) is cut to its first line."""
    scheme = scheme_of(url)
    needs = _CLIENT_LIBRARIES.get(scheme) or _BACKENDS.get(scheme) or f"the fsspec backend for {scheme}://"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return f"{url}: {scheme}:// cannot be reached from this machine: install {needs} ({first})"


@contextlib.contextmanager
def guard(url: str, doing: str) -> Iterator[None]:
    """Turn a backend's failure (a botocore error, a timeout) into one line with exit 3.

    ``FileNotFoundError`` passes through: callers decide what a missing file means.
    """
    try:
        yield
    except (FileNotFoundError, StorageError, UsageError):
        raise
    except Exception as error:
        raise StorageError(f"{url}: could not {doing}: {type(error).__name__}: {error}") from None


def listdir(url: str) -> list[str]:
    """Names in a folder, read fresh (fsspec caches listings, and other processes write here)."""
    if is_local(url):
        return os.listdir(normalize(url))
    fs, path = filesystem(url)
    with guard(url, "list"):
        fs.invalidate_cache(path)
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]


# In the driver, Spark's data (the paths it reads and writes, as fsspec URLs) is served through the
# client Spark wrote it with (driver/process/hadoopfs.py installs it): an output on s3a:// or hdfs:// then
# needs no Python backend there. Everywhere else, and for local paths, fsspec.
_data_resolver: Callable[[str], tuple[Any, str]] | None = None


def serve_data(resolver: Callable[[str], tuple[Any, str]] | None) -> None:
    """Serve non-local data paths through ``resolver`` (URL -> filesystem, path), or through fsspec
    again (None)."""
    global _data_resolver
    _data_resolver = resolver


def data_filesystem(url: str) -> tuple[Any, str]:
    """The filesystem and path of a data path (an input or output of Spark's, not the run
    directory): the driver's Hadoop client where one serves it, else fsspec's."""
    if _data_resolver is not None and not is_local(url):
        return _data_resolver(url)
    return filesystem(url)


def data_exists(url: str) -> bool:
    if is_local(url) or _data_resolver is None:
        return exists(url)
    fs, path = data_filesystem(url)
    with guard(url, "look up"):
        return bool(fs.exists(path))


def data_stat(url: str) -> tuple[int, float | None]:
    """``stat`` for a data path (through the driver's Hadoop client where one serves it)."""
    if is_local(url) or _data_resolver is None:
        return stat(url)
    fs, path = data_filesystem(url)
    info = fs.info(path)
    return int(info.get("size") or 0), info.get("mtime")


def to_spark_path(url: str) -> str:
    """How Spark names the place an fsspec URL points to."""
    scheme = scheme_of(url)
    if scheme in ("", "file", "local"):
        return "file://" + normalize(url)
    if scheme in _FSSPEC_TO_HADOOP:
        return _FSSPEC_TO_HADOOP[scheme] + url[len(scheme) :]
    return url


def from_spark_path(path: str) -> str:
    """The fsspec URL of a fully qualified Spark path (``file:/x``, ``s3a://b/k``)."""
    scheme = scheme_of(path)
    if scheme in ("", "file", "local"):
        return normalize(path)
    if scheme in _HADOOP_TO_FSSPEC:
        return _HADOOP_TO_FSSPEC[scheme] + path[len(scheme) :].rstrip("/")
    return path.rstrip("/")


def write_beside(path: str, data: bytes, tag: str) -> str:
    """Write ``data`` durably (fsync) to ``<path>.<tag>``, a local file beside ``path`` (its folder
    made first), and return that name: the caller then renames or links it into place."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{tag}"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp


def write_atomic(url: str, data: bytes) -> None:
    """Replace ``url`` with ``data`` so a reader sees the old or the new content, never half."""
    if is_local(url):
        path = normalize(url)
        os.replace(write_beside(path, data, f"tmp-{os.getpid()}"), path)
        return
    fs, path = filesystem(url)
    with guard(url, "write"):
        fs.pipe_file(path, data)  # a single PUT is atomic on object stores


def read_bytes(url: str) -> bytes:
    if is_local(url):
        with open(normalize(url), "rb") as handle:
            return handle.read()
    fs, path = filesystem(url)
    with guard(url, "read"):
        return fs.cat_file(path)


def stat(url: str) -> tuple[int, float | None]:
    """(size in bytes, modification time as epoch seconds or None where the store has none)."""
    if is_local(url):
        info = os.stat(normalize(url))
        return info.st_size, info.st_mtime
    fs, path = filesystem(url)
    info = fs.info(path)
    modified = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or info.get("updated")
    if hasattr(modified, "timestamp"):
        modified = modified.timestamp()
    elif isinstance(modified, str):
        from datetime import datetime

        modified = datetime.fromisoformat(modified.replace("Z", "+00:00")).timestamp()
    return int(info.get("size") or 0), (float(modified) if modified is not None else None)


def exists(url: str) -> bool:
    if is_local(url):
        return os.path.exists(normalize(url))
    fs, path = filesystem(url)
    with guard(url, "look up"):
        fs.invalidate_cache(path)
        return fs.exists(path)


def create_new(url: str, data: bytes) -> bool:
    """Create ``url`` holding ``data`` unless it exists; False when it does. One step where the
    store can do it: an exclusive create on local disk, a PUT with ``If-None-Match: *`` on S3.
    Elsewhere a look and then a write: two processes in the same instant could both create it
    (docs/launchers.md says what guards a run there)."""
    if is_local(url):
        path = normalize(url)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    fs, path = filesystem(url)
    if scheme_of(url) in ("s3", "s3a"):
        try:
            fs.pipe_file(path, data, mode="create")
        except Exception as error:
            if precondition_failed(error):
                return False
            with guard(url, "create"):
                raise
        fs.invalidate_cache(path)
        return True
    if exists(url):
        return False
    with guard(url, "create"):
        fs.pipe_file(path, data)
    return True


def precondition_failed(error: BaseException | None) -> bool:
    """A 412 (or 409) of a conditional PUT, however s3fs wrapped botocore's error."""
    seen = 0
    while error is not None and seen < 5:
        text = str(error)
        if (
            isinstance(error, FileExistsError)
            or "PreconditionFailed" in text
            or "pre-conditions" in text
            or "ConditionalRequestConflict" in text
        ):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
