"""``lease.json``: who is running a run now (docs/design.md §8).

The holder rewrites its heartbeat every ``ttl / 3`` seconds from a daemon thread. A lease is live
when its heartbeat is younger than its TTL and, on this host, its pid still exists. A second
``submit``/``resume`` of a live run is refused (exit 4); a stale lease is taken over, with a
warning. The TTL is 30 s, or ``$SPARKRECOVER_LEASE_TTL`` seconds (tests make it short); readers
use the TTL the holder wrote.

How a lease is written, so that two starters cannot both win:

- **Local disk**: a new lease is written to a private temporary file and hard-linked into place,
  which fails if the name exists: the lease appears whole or not at all (never empty). A lease
  is created or taken over only under ``lease.lock`` (rundir/lease_lock.py), which a driver's job
  commit holds too: two starters take turns, and no takeover falls inside a job commit.
- **S3** (and S3-compatible stores that honour conditional writes): a new lease is a PUT with
  ``If-None-Match: *`` (create only); a takeover and every heartbeat are a PUT with
  ``If-Match: <ETag>`` of the version the writer judged (compare-and-swap), so a heartbeat can
  never overwrite the lease of the process that took the run over.
- **Other stores**: the lease is written, read back after a short pause, and given up if another
  holder's write landed last. Two starters within that pause can both believe they won for a
  moment; the loser finds out at its next heartbeat, and its driver at its next stage commit
  (fencing, below), before it commits anything.

An unreadable ``lease.json`` (empty, cut short, not JSON) is reported (exit 4, with who to ask
and how to clear it) until the file is older than the TTL; then it is stale like any other.

Fencing: the driver is given the token of the lease it runs under (``--lease-token``) and
checks ``lease.json`` still holds it before each stage starts writing and before each commit
(``driver/process/fence.py``); a holder whose heartbeat finds another token (or none) sets ``lost``.
"""

from __future__ import annotations

import getpass
import os
import pwd
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from sparkrecover.errors import LeaseHeldError, UsageError
from sparkrecover.rundir import formats, lease_lock, storage
from sparkrecover.rundir.runs import Run

LEASE_FILE = "lease.json"
DEFAULT_TTL = 30.0
TTL_ENV = "SPARKRECOVER_LEASE_TTL"
_ATTEMPTS = 5  # looks at the lease before giving up on a contended acquire (never a recursion)


def _now() -> float:
    return time.time()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def configured_ttl() -> float:
    """The TTL of leases this process takes: ``$SPARKRECOVER_LEASE_TTL`` seconds, else 30."""
    given = os.environ.get(TTL_ENV)
    if not given:
        return DEFAULT_TTL
    try:
        ttl = float(given)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise UsageError(f"${TTL_ENV} must be a number of seconds above 0, not {given!r}")
    return ttl


@dataclass
class Found:
    """What ``lease.json`` holds: ``document`` None with ``exists`` means unreadable."""

    exists: bool
    document: dict[str, Any] | None = None
    etag: str | None = None  # object stores: the version this look saw
    modified: float | None = None  # epoch seconds, for the age of an unreadable lease
    owner: str | None = None  # local disk: the user owning the file


def _parse(data: bytes, url: str) -> dict[str, Any] | None:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return formats.checked(formats.LEASE, document, url) if isinstance(document, dict) else None


def look(url: str) -> Found:
    """Read ``lease.json`` with what judging it needs (its ETag on S3, its age, its owner)."""
    if storage.is_local(url):
        path = storage.normalize(url)
        try:
            with open(path, "rb") as handle:
                held = os.fstat(handle.fileno())
                data = handle.read()
        except FileNotFoundError:
            return Found(False)
        try:
            owner: str | None = pwd.getpwuid(held.st_uid).pw_name
        except KeyError:
            owner = str(held.st_uid)
        return Found(True, _parse(data, url), None, held.st_mtime, owner)
    fs, path = storage.filesystem(url)
    with storage.guard(url, "read the lease"):
        for _ in range(3):  # the ETag of exactly the bytes read: read, stat, read again
            try:
                fs.invalidate_cache(path)
                data = fs.cat_file(path)
                info = fs.info(path)
                again = fs.cat_file(path)
            except FileNotFoundError:
                return Found(False)
            if again == data:
                break
        return Found(True, _parse(data, url), info.get("ETag"), _modified(info))


def _modified(info: dict[str, Any]) -> float | None:
    stamp = info.get("LastModified") or info.get("mtime") or info.get("updated")
    return float(stamp.timestamp()) if stamp is not None and hasattr(stamp, "timestamp") else None


def read_lease(run_dir: str) -> dict[str, Any] | None:
    """The lease as stored, None when there is none or it cannot be read; a lease of a format
    version this sparkrecover does not know is ``FormatError`` (exit 3)."""
    url = storage.join(run_dir, LEASE_FILE)
    try:
        return look(url).document
    except (OSError, ValueError):
        return None


def is_live(lease: dict[str, Any] | None, now: float | None = None) -> bool:
    if not lease:
        return False
    now = _now() if now is None else now
    if now - float(lease.get("heartbeat_epoch", 0)) > float(lease.get("ttl_s", DEFAULT_TTL)):
        return False
    if lease.get("host") == socket.gethostname():
        return _pid_alive(int(lease.get("pid", -1)))
    return True


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process stays a zombie until reaped: dead all the same
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def describe(lease: dict[str, Any]) -> str:
    if lease.get("unreadable"):
        return f"an unreadable lease ({lease['unreadable']})"
    return (
        f"pid {lease.get('pid')} on {lease.get('host')} (user {lease.get('user')}, heartbeat {lease.get('heartbeat')})"
    )


def _conditional(url: str) -> bool:
    """Whether the store takes create-only and compare-and-swap PUTs (S3 and compatibles)."""
    return storage.scheme_of(url) in ("s3", "s3a")


class Lease:
    def __init__(self, run: Run, ttl: float | None = None):
        self.url = storage.join(run.dir, LEASE_FILE)
        self.run = run
        self.ttl = configured_ttl() if ttl is None else ttl
        self.token = f"{socket.gethostname()}:{os.getpid()}:{time.monotonic_ns()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._etag: str | None = None
        self.took_over: dict[str, Any] | None = None
        # Set when a heartbeat finds the lease taken over or gone: this process no longer holds
        # the run, and must neither retry nor release.
        self.lost = threading.Event()

    def _document(self) -> bytes:
        now = _now()
        return orjson.dumps(
            formats.stamped(
                formats.LEASE,
                {
                    "run": self.run.id,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "user": user_name(),
                    "token": self.token,
                    "ttl_s": self.ttl,
                    "heartbeat": _iso(now),
                    "heartbeat_epoch": now,
                },
            )
        )

    def acquire(self) -> Lease:
        # On local disk the lease changes hands only under its lock, which a driver's job commit
        # also holds from its check of the lease to its end (rundir/lease_lock.py).
        with lease_lock.held(self.run):
            self._take()
        self._thread = threading.Thread(target=self._beat, name="sparkrecover-lease", daemon=True)
        self._thread.start()
        return self

    def _take(self) -> None:
        """Look at the lease and create it, or take a stale one over (``LeaseHeldError``: live)."""
        for _ in range(_ATTEMPTS):
            found = look(self.url)
            if not found.exists:
                if self._create():
                    break
                continue  # somebody created it between our look and our create: look again
            current = found.document
            if current is not None and is_live(current):
                raise LeaseHeldError(f"run {self.run.id} is being run by {describe(current)}")
            if current is None:
                self._check_unreadable(found)
                current = {"unreadable": f"{self.url}, last written {_iso(found.modified or 0)}"}
            if self._replace(found):
                self.took_over = current
                break
            landed = read_lease(self.run.dir)
            raise LeaseHeldError(f"run {self.run.id} was taken by {describe(landed or {})}")
        else:
            raise LeaseHeldError(
                f"run {self.run.id}: its lease {self.url} kept changing while this "
                "process tried to take it; another submit or resume is starting it"
            )

    def _check_unreadable(self, found: Found) -> None:
        """An unreadable lease younger than the TTL may be one being written: refuse, saying how
        to clear it. Older than the TTL, it is stale."""
        age = _now() - found.modified if found.modified is not None else 0.0
        if age > self.ttl:
            return
        who = f"its owner, user {found.owner}" if found.owner else "whoever runs this run"
        raise LeaseHeldError(
            f"run {self.run.id}: its lease {self.url} is unreadable (empty or cut short, written "
            f"{age:.0f} s ago): ask {who}, whether a submit or resume of it is still running. If none "
            f"is, remove {self.url} and try again; it is treated as stale once older than {self.ttl:g} s"
        )

    def _create(self) -> bool:
        """Create the lease with its content in one step; False if it exists."""
        data = self._document()
        if storage.is_local(self.url):
            path = storage.normalize(self.url)
            tmp = storage.write_beside(path, data, f"new-{os.getpid()}-{threading.get_ident()}")
            try:
                os.link(tmp, path)  # fails if the name exists: whole or not at all
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            return True
        if _conditional(self.url):
            return self._put(data, mode="create")
        storage.write_atomic(self.url, data)
        return self._landed()

    def _replace(self, found: Found) -> bool:
        """Replace the stale lease ``found``; False if another holder got there first."""
        data = self._document()
        if _conditional(self.url) and found.etag:
            return self._put(data, IfMatch=found.etag)
        storage.write_atomic(self.url, data)
        return self._landed()

    def _put(self, data: bytes, **condition: Any) -> bool:
        fs, path = storage.filesystem(self.url)
        try:
            response = fs.pipe_file(path, data, **condition)
        except Exception as error:
            if storage.precondition_failed(error):
                return False
            with storage.guard(self.url, "write the lease"):
                raise
        fs.invalidate_cache(path)
        self._etag = (response or {}).get("ETag") if isinstance(response, dict) else None
        return True

    def _landed(self) -> bool:
        time.sleep(0.05)
        landed = read_lease(self.run.dir)
        return landed is not None and landed.get("token") == self.token

    def _heartbeat(self) -> bool:
        """Renew the lease; False (and nothing written) when it is no longer ours."""
        if _conditional(self.url) and self._etag:
            return self._put(self._document(), IfMatch=self._etag)
        # The check and the write under the lock a takeover takes: a driver frozen between them
        # (SIGSTOP, a paused VM) would otherwise, once thawed, write its lease over its successor's
        # (or back after a release), and its job commit would pass the fence.
        try:
            with lease_lock.held(self.run, wait_s=self.ttl / 3):
                landed = read_lease(self.run.dir)
                if landed is None or landed.get("token") != self.token:
                    return False  # taken over (or removed) by someone who judged us dead: do not fight
                storage.write_atomic(self.url, self._document())
        except LeaseHeldError:
            pass  # our own job commit holds the lock (no takeover can happen meanwhile): beat next time
        return True

    def still_held(self) -> bool:
        """Whether this process still holds the run: no heartbeat found it lost, and the lease
        stored now carries this token (looked at now: the last heartbeat may be seconds old)."""
        if self.lost.is_set():
            return False
        try:
            found = look(self.url)
        except Exception:
            return True  # the store is unreachable: nothing says another took it
        if found.document is None or found.document.get("token") != self.token:
            self.lost.set()
            return False
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not self._heartbeat():
                    self.lost.set()
                    return
            except Exception:
                pass  # the store is unreachable for now: try again at the next beat

    def release(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        if self.lost.is_set():
            return
        try:
            with lease_lock.held(self.run, wait_s=5.0):  # as in _heartbeat
                landed = read_lease(self.run.dir)
                if landed is not None and landed.get("token") == self.token:
                    fs, path = storage.filesystem(self.url)
                    fs.rm(path)
        except Exception:
            pass  # a lease left behind goes stale: the next submit or resume takes it over


def user_name() -> str:
    """Who runs this process, for the lease and ``run.started``."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
