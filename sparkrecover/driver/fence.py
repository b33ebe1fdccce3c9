"""Fencing (docs/operations.md): a driver whose run was taken over commits nothing more.

The CLI that launched this driver holds the run's lease and passes its token (``--lease-token``).
Before a stage writes anything and before it commits, the driver reads ``lease.json``: when it
no longer holds that token (a resume judged this attempt dead after a pause or a network
partition, took the lease over, and may have run and released it since), the driver journals
``lease.lost``, says so on stderr and exits with ``EXIT_LEASE_LOST`` (75), before the write or
the commit. A lease that cannot be read because its storage is unreachable does not fence (the
journal's own storage failure is reported as usual): only a lease seen held by another token,
missing, or damaged does.

Those checks run in Python, between Spark jobs. A driver frozen *inside* a write and continued
after the takeover would finish its Spark job and its job commit before Python runs again, so the
job commit checks too: ``arm`` hands the lease's path and token to the JVM's
``FencedCommitProtocol`` and makes it the session's commit protocol, unless the application set
its own (``spark.sql.sources.commitProtocolClass``: then only the Python checks fence). Its
refusal fails the write; ``failed`` turns that failure into the same exit 75.
"""

from __future__ import annotations

import sys
from typing import Any

from sparkrecover import jvm
from sparkrecover.errors import EXIT_LEASE_LOST
from sparkrecover.journal import events as ev
from sparkrecover.jvm import COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import storage


class LeaseLost(SystemExit):
    """Raised inside the user's script: a SystemExit, so ``except Exception`` does not swallow it,
    and the bootstrap ends the driver with its code."""


def check(rt: Any, stage: str, doing: str) -> None:
    """Exit (``LeaseLost``) unless this driver's lease is still the run's lease."""
    token = getattr(rt, "lease_token", None)
    if token is None:
        return  # not launched under a lease (in-process tests, an older CLI)
    if rt.fenced:
        raise LeaseLost(EXIT_LEASE_LOST)
    try:
        found = leases.look(storage.join(rt.run_dir, leases.LEASE_FILE))
    except Exception:
        return  # storage unreachable: cannot tell, and the journal reports the outage
    holder = found.document
    if holder is not None and holder.get("token") == token:
        return
    rt.fenced = True
    who = (
        leases.describe(holder)
        if holder
        else ("nobody (the lease was released)" if not found.exists else "nobody (the lease is unreadable)")
    )
    try:
        rt.writer.emit(
            ev.LEASE_LOST, token=token, holder=holder.get("token") if holder else None, stage=stage, doing=doing
        )
        rt.writer.flush()
    except Exception:
        pass  # journaled if it can be
    print(
        f"sparkrecover: error: this driver lost the run's lease (now held by {who}): another "
        f"submit or resume took the run over; stopping before {doing} of stage {stage} "
        f"(exit {EXIT_LEASE_LOST})",
        file=sys.stderr,
        flush=True,
    )
    raise LeaseLost(EXIT_LEASE_LOST)


def failed(rt: Any, stage: str, error: BaseException) -> None:
    """A stage's code failed: if the lease is gone, that is why (the job commit refused), and the
    driver ends fenced (``LeaseLost``) instead of reporting the failure as the application's."""
    if isinstance(error, LeaseLost) or getattr(rt, "lease_token", None) is None or rt.fenced:
        return
    check(rt, stage, "the job commit")


def arm(rt: Any, sc: Any) -> str | None:
    """Make every file write's job commit check the lease (``FencedCommitProtocol``), from the
    session's first write on. Returns None when armed, else why not; when the application set a
    commit protocol of its own, or the JVM cannot read the lease's storage (``s3://`` without the
    s3a connector, say), job commits are not checked: cannot tell is not lost."""
    token = getattr(rt, "lease_token", None)
    if token is None:
        return "this driver runs under no lease"
    conf = sc.getConf()
    if conf.contains(COMMIT_PROTOCOL_CONF):
        return f"the application sets its own commit protocol ({COMMIT_PROTOCOL_CONF}={conf.get(COMMIT_PROTOCOL_CONF)})"
    lease_path = storage.to_spark_path(storage.join(rt.run_dir, leases.LEASE_FILE))
    try:
        protocol = jvm.find_class(sc._jvm, FENCED_PROTOCOL_CLASS)
        if protocol is None:
            return "the sparkrecover jar is not loaded"
        problem = protocol.arm(lease_path, token, sc._jsc.hadoopConfiguration())
    except Exception as error:  # no jar (no JDK, SPARKRECOVER_NO_JVM_LISTENER), Spark Connect
        return f"the sparkrecover jar is not loaded ({type(error).__name__})"
    if problem:
        return str(problem)
    # pyspark's SparkContext wraps the JVM context's own SparkConf: sessions made from here on
    # start from it, and a protocol the application sets on its session later still wins.
    sc._conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)
    return None
