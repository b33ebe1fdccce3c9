"""Fencing (docs/operations.md): a driver whose run was taken over commits nothing more.

A driver runs under a lease token: the one of the CLI that launched it (``--lease-token``), or
the one of the lease it took itself when a launcher restarted it (``driver/process/which_attempt.py``). A driver
is also fenced once a later attempt of its run has started: under ``submit --deploy-mode
cluster`` YARN's next application attempt runs under the same token as the one before it.
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

from typing import Any

from sparkrecover import jvm
from sparkrecover.driver.process import messages
from sparkrecover.errors import EXIT_LEASE_LOST
from sparkrecover.journal import events as ev
from sparkrecover.journal import segments
from sparkrecover.jvm import COMMIT_PROTOCOL_CONF, FACTORY_COMMITTER_CONF, FENCED_PROTOCOL_CLASS, PATH_OUTPUT_PROTOCOL
from sparkrecover.rundir import lease as leases
from sparkrecover.rundir import runs, storage


class LeaseLost(SystemExit):
    """Raised inside the user's script: a SystemExit, so ``except Exception`` does not swallow it,
    and the bootstrap ends the driver with its code."""


def check(rt: Any, stage: str, doing: str) -> None:
    """Exit (``LeaseLost``) unless this driver's lease is still the run's lease and no later
    attempt of the run has started."""
    token = getattr(rt, "lease_token", None)
    if token is None:
        return  # not launched under a lease (in-process tests, an older CLI)
    if rt.fenced:
        raise LeaseLost(EXIT_LEASE_LOST)
    try:
        found = leases.look(storage.join(rt.run_dir, leases.LEASE_FILE))
        later = later_attempt(rt)
    except Exception:
        return  # storage unreachable: cannot tell, and the journal reports the outage
    holder = found.document
    if holder is not None and holder.get("token") == token and later is None:
        return
    rt.fenced = True
    if later is not None and holder is not None and holder.get("token") == token:
        # Under the lease of a command that still waits for the application (YARN's next
        # application attempt gets the same command line and token): the later attempt decides.
        why = f"attempt {later} of this run has started (the cluster restarted the driver)"
    else:
        who = (
            leases.describe(holder)
            if holder
            else ("nobody (the lease was released)" if not found.exists else "nobody (the lease is unreadable)")
        )
        why = (
            f"this driver lost the run's lease (now held by {who}): another submit, resume or "
            "restarted driver took the run over"
        )
    try:
        rt.writer.emit(
            ev.LEASE_LOST,
            token=token,
            holder=holder.get("token") if holder else None,
            later_attempt=later,
            stage=stage,
            doing=doing,
        )
        rt.writer.flush()
    except Exception:
        pass  # journaled if it can be
    messages.say(f"sparkrecover: error: {why}; stopping before {doing} of stage {stage} (exit {EXIT_LEASE_LOST})")
    raise LeaseLost(EXIT_LEASE_LOST)


def later_attempt(rt: Any) -> int | None:
    """The latest attempt of the run when it is later than this driver's, else None: a driver
    whose run has a later attempt is a predecessor that came back (a paused VM, SIGSTOP), and
    commits nothing more."""
    latest = segments.latest_attempt(rt.run_dir)
    return latest if latest > rt.writer.attempt else None


def failed(rt: Any, stage: str, error: BaseException) -> None:
    """A stage's code failed: if the lease is gone, that is why (the job commit refused), and the
    driver ends fenced (``LeaseLost``) instead of reporting the failure as the application's."""
    if isinstance(error, LeaseLost) or getattr(rt, "lease_token", None) is None or rt.fenced:
        return
    check(rt, stage, "the job commit")


def arm(rt: Any, sc: Any) -> str | None:
    """Make every file write's job commit check the lease (``FencedCommitProtocol``), from the
    session's first write on (in place of spark-hadoop-cloud's ``PathOutputCommitProtocol`` too,
    when the application names it). Returns None when armed, else why not; when the application set
    another commit protocol of its own, or the JVM cannot read the lease's storage (``s3://`` without the
    s3a connector, say), job commits are not checked: cannot tell is not lost."""
    token = getattr(rt, "lease_token", None)
    if token is None:
        return "this driver runs under no lease"
    conf = sc.getConf()
    own = conf.get(COMMIT_PROTOCOL_CONF) if conf.contains(COMMIT_PROTOCOL_CONF) else None
    # spark-hadoop-cloud's protocol for the S3A committers: ours stands in for it (the committer from
    # the factory, tasks in its work path), so the lease is checked and pendingsets can be adopted.
    stands_in = own == PATH_OUTPUT_PROTOCOL
    if own is not None and not stands_in:
        return f"the application sets its own commit protocol ({COMMIT_PROTOCOL_CONF}={own})"
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
    protocol.armAttempt(storage.to_spark_path(storage.join(rt.run_dir, runs.JOURNAL_DIR)), rt.writer.attempt)
    # pyspark's SparkContext wraps the JVM context's own SparkConf: sessions made from here on
    # start from it, and a protocol the application sets on its session later still wins.
    sc._conf.set(COMMIT_PROTOCOL_CONF, FENCED_PROTOCOL_CLASS)
    if stands_in:
        sc._conf.set(FACTORY_COMMITTER_CONF, "true")
    return None
