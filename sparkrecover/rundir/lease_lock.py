"""``lease.lock``: on a local run directory, the lease changes hands only while this lock is held,
and a driver's job commit holds it from its check of the lease to its end
(``sparkrecover/jvm/commit/FencedCommitProtocol.java``). So a takeover never falls between a driver's
check and its commit: it waits for the commit to end, and the commit, if the takeover came first,
sees it (docs/operations.md, "Fencing").

A POSIX record lock (``fcntl``), the kind Java's ``FileChannel.lock`` takes on Linux, so the two
processes see each other's; the kernel drops it when its process dies, so a dead driver never
holds a run. Other stores have no such lock: there ``held`` holds nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator

from sparkrecover.errors import LeaseHeldError
from sparkrecover.rundir import storage
from sparkrecover.rundir.runs import Run

LOCK_FILE = "lease.lock"  # FencedCommitProtocol.LOCK_FILE
# How long a takeover waits for a job commit under way before it gives up (exit 4).
COMMIT_WAIT_S = 30.0
_POLL_S = 0.05


@contextlib.contextmanager
def held(run: Run, wait_s: float | None = None) -> Iterator[None]:
    """Hold the run's lease lock (local run directories; elsewhere nothing). ``LeaseHeldError``
    when a job commit keeps it longer than ``wait_s`` (default ``COMMIT_WAIT_S``)."""
    if not storage.is_local(run.dir):
        yield
        return
    folder = storage.normalize(run.dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + (COMMIT_WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EACCES, errno.EAGAIN):
                    break  # a filesystem without locks (some network mounts): the checks alone, as elsewhere
                if time.monotonic() >= deadline:
                    raise LeaseHeldError(
                        f"run {run.id}: a driver of it is committing a write or renewing its lease ({path} "
                        "is locked), so its lease cannot change hands now; try again when it is done. A "
                        "driver frozen there (a paused VM, SIGSTOP) holds it until it ends: end it first"
                    ) from None
                time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock
