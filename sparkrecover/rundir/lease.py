"""``lease.json``: who is running a run now (DESIGN §8).

The holder rewrites its heartbeat every ``ttl / 3`` seconds from a daemon thread. A lease is live
when its heartbeat is younger than its TTL and, on this host, its pid still exists. A second
``submit``/``resume`` of a live run is refused (exit 4); a stale lease is taken over, with a
warning. On local disk a fresh lease is created with O_EXCL so two starters cannot both win;
a takeover, and object stores, re-read the lease after writing it and back off if another
holder's write landed last.
"""
from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from sparkrecover.errors import LeaseHeldError
from sparkrecover.rundir import formats, storage

LEASE_FILE = "lease.json"
DEFAULT_TTL = 30.0


def _now() -> float:
    return time.time()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_lease(run_dir: str) -> dict[str, Any] | None:
    """The lease as stored, None when there is none or it cannot be read; a lease of a format
    version this sparkrecover does not know is ``FormatError`` (exit 3)."""
    url = storage.join(run_dir, LEASE_FILE)
    try:
        document = orjson.loads(storage.read_bytes(url))
    except (OSError, orjson.JSONDecodeError):
        return None
    return formats.checked(formats.LEASE, document, url) if isinstance(document, dict) else None


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
    return (f"pid {lease.get('pid')} on {lease.get('host')} (user {lease.get('user')}, "
            f"heartbeat {lease.get('heartbeat')})")


class Lease:
    def __init__(self, run_dir: str, run_id: str, ttl: float = DEFAULT_TTL):
        self.url = storage.join(run_dir, LEASE_FILE)
        self.run_dir, self.run_id, self.ttl = run_dir, run_id, ttl
        self.token = f"{socket.gethostname()}:{os.getpid()}:{time.monotonic_ns()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.took_over: dict[str, Any] | None = None

    def _document(self) -> bytes:
        now = _now()
        return orjson.dumps(formats.stamped(formats.LEASE, {
            "run": self.run_id, "host": socket.gethostname(), "pid": os.getpid(),
            "user": _user(), "token": self.token, "ttl_s": self.ttl,
            "heartbeat": _iso(now), "heartbeat_epoch": now,
        }))

    def acquire(self) -> Lease:
        current = read_lease(self.run_dir)
        if current is not None and is_live(current):
            raise LeaseHeldError(f"run {self.run_id} is being run by {describe(current)}")
        if current is None and storage.is_local(self.url):
            if not self._create_exclusive():
                return self.acquire()  # somebody created it between our read and our create
        else:
            self.took_over = current
            storage.write_atomic(self.url, self._document())
            time.sleep(0.05)
            landed = read_lease(self.run_dir)
            if landed is None or landed.get("token") != self.token:
                raise LeaseHeldError(f"run {self.run_id} was taken by {describe(landed or {})}")
        self._thread = threading.Thread(target=self._beat, name="sparkrecover-lease", daemon=True)
        self._thread.start()
        return self

    def _create_exclusive(self) -> bool:
        path = storage.normalize(self.url)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(self._document())
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                landed = read_lease(self.run_dir)
                if landed is not None and landed.get("token") not in (None, self.token):
                    return  # taken over by someone who judged us dead; do not fight
                storage.write_atomic(self.url, self._document())
            except Exception:
                pass

    def release(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        try:
            landed = read_lease(self.run_dir)
            if landed is not None and landed.get("token") == self.token:
                fs, path = storage.filesystem(self.url)
                fs.rm(path)
        except Exception:
            pass


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
