"""Keeping shuffle map outputs: the spark-submit settings that install the keeping shuffle
manager (sparkrecover/jvm/shuffle/KeepingShuffleManager.java), and the list of kept map outputs a resumed
attempt may reuse (docs/shuffles.md).

``--keep-shuffles``:
- ``auto`` (the default): where it costs nothing on the map task's path. A run directory on shared
  storage (``s3://``, ``hdfs://``, ``gs://``, ...): each map output is copied there by the executor
  that wrote it, in the background. A local run directory with a local master whose Spark local
  directory shares its filesystem: hard links. A local run directory on a cluster: nothing (the
  executors may not see it), said in one line.
- ``link``: hard links only (a local run directory); a map output whose link fails is not kept.
- ``copy``: copies into the keep folder, wherever it is: a folder every executor sees, or shared storage.
- ``off``: Spark's own shuffle manager, nothing kept.

Never installed over a shuffle manager the user chose (a remote shuffle service such as Celeborn or
Uniffle sets one), with push-based shuffle or under Spark Connect: each of those is said once and
journaled as ``shuffle.unsupported``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from sparkrecover.core.verdicts import staleness
from sparkrecover.jvm import (
    EXECUTOR_CLASS_PATH_CONF,
    KEEPING_IO_CLASS,
    KEEPING_PLUGIN_CLASS,
    PLUGINS_CONF,
    SHUFFLE_DIR_CONF,
    SHUFFLE_IO_CONF,
    SHUFFLE_MANAGER_CLASS,
    SHUFFLE_MANAGER_CONF,
    SHUFFLE_MODE_CONF,
    SHUFFLE_REUSE_CONF,
    SHUFFLE_SCRIPT_CONF,
    SHUFFLE_SERVE_CONF,
)
from sparkrecover.launch import spark_argv
from sparkrecover.rundir import keep, storage
from sparkrecover.rundir.plans import KeptShuffle

MODES = ("auto", "link", "copy", "off")
DEFAULT_MODE = "auto"


@dataclass
class Setup:
    """What one attempt does about shuffles: the options to add, or why nothing is kept."""

    options: list[str] = field(default_factory=list)
    # Values appended to list settings after the user's (spark.plugins, a class path).
    appended: dict[str, str] = field(default_factory=dict)
    mode: str = "off"
    reason: str | None = None  # set when keeping was asked for (or automatic) and cannot be done
    # ``auto`` keeps nothing on a cluster where the user could keep (a flag or a shared root): said
    # before the launch, since a run that is killed never reaches a message printed after it.
    tell: bool = False


def setup(
    parsed: spark_argv.SubmitArgs,
    run_dir: str,
    mode: str,
    *,
    jar: str | None,
    spark_version: str | None = None,
    reuse: list[KeptShuffle] | None = None,
    attempt: int = 1,
    make_folder: bool = True,
) -> Setup:
    """The options that keep this attempt's map outputs (and reuse the plan's kept ones).
    ``make_folder`` False (``spark-submit-args``, which only prints a line): the keep folder is
    left to the keeping shuffle manager, which makes it when it keeps a map output."""
    if mode == "off":
        return Setup()
    folder = keep.folder(run_dir)
    reason = _unsupported(parsed, jar)
    if reason is None and folder is None:
        reason = f"Spark cannot reach the run directory {run_dir}"
    if reason is not None:
        return Setup(reason=reason)
    reason = _not_here(parsed, run_dir, folder or "", mode, spark_version)
    if reason is not None:
        return Setup(reason=reason, tell=mode == "auto" and not _local_master(parsed))
    assert jar is not None and folder is not None
    effective = "copy" if mode == "copy" or not storage.is_local(run_dir) else "link"
    if make_folder:
        keep.create(run_dir)
    confs = {
        SHUFFLE_MANAGER_CONF: SHUFFLE_MANAGER_CLASS,
        SHUFFLE_DIR_CONF: folder if storage.is_local(folder) else storage.to_spark_path(folder),
        SHUFFLE_MODE_CONF: effective,
        SHUFFLE_SCRIPT_CONF: staleness.script_digest(parsed.app, storage.read_bytes),
    }
    if serving(parsed):
        # The driver serves a lost executor's map outputs from their copies (docs/shuffles.md).
        confs[SHUFFLE_IO_CONF] = KEEPING_IO_CLASS
        confs[SHUFFLE_SERVE_CONF] = "true"
    if reuse:
        confs[SHUFFLE_REUSE_CONF] = keep.write_reuse_list(run_dir, attempt, reuse)
    options: list[str] = []
    for key, value in confs.items():
        options += ["--conf", f"{key}={value}"]
    # Executors tell the driver which map outputs they kept (KeepingPlugin).
    appended = {PLUGINS_CONF: KEEPING_PLUGIN_CLASS}
    if _before_spark_4(spark_version) and not _local_master(parsed):
        # Spark 3.5's executors create their shuffle manager before they fetch --jars.
        appended[EXECUTOR_CLASS_PATH_CONF] = jar
    return Setup(options=options, appended=appended, mode=effective)


def serving(parsed: spark_argv.SubmitArgs) -> bool:
    """Whether a lost executor's kept map outputs are served from their copies: on a cluster (a
    local master loses no executor), unless the application names its own shuffle storage plugin,
    uses dynamic allocation (Spark would then remove executors whose copies are not yet durable,
    counting on storage that is reliable for every map output) or the external shuffle service
    (which serves a lost executor's map outputs itself)."""
    if _local_master(parsed) or parsed.conf(SHUFFLE_IO_CONF):
        return False
    switches = ("spark.dynamicAllocation.enabled", "spark.shuffle.service.enabled")
    return not any((parsed.conf(name) or "").strip().lower() == "true" for name in switches)


def _unsupported(parsed: spark_argv.SubmitArgs, jar: str | None) -> str | None:
    own = parsed.conf(SHUFFLE_MANAGER_CONF)
    if own:
        return f"the application sets its own shuffle manager ({own}), e.g. a remote shuffle service"
    if spark_argv.spark_connect(parsed):
        return "the application talks to Spark Connect, whose server runs the shuffles"
    if (parsed.conf("spark.shuffle.push.enabled") or "").strip().lower() == "true":
        return "push-based shuffle (spark.shuffle.push.enabled) merges map outputs on remote services"
    if (parsed.conf("spark.io.encryption.enabled") or "").strip().lower() == "true":
        return "spark.io.encryption.enabled: shuffle files are encrypted with a key of one application"
    if jar is None:
        return "the sparkrecover jar is not available (no JDK to compile it)"
    return None


def _not_here(
    parsed: spark_argv.SubmitArgs, run_dir: str, folder: str, mode: str, spark_version: str | None
) -> str | None:
    """Why ``mode`` keeps nothing for this run directory and master, or None."""
    master = parsed.master or "local[*]"
    local_root = storage.is_local(run_dir)
    if mode == "link" and not local_root:
        return f"--keep-shuffles link needs a local run directory (not {run_dir}); --keep-shuffles copy copies there"
    if mode != "auto":
        return None
    if local_root and not _local_master(parsed):
        return (
            f"--keep-shuffles auto keeps nothing with a local run directory on a cluster ({master}): use "
            "--keep-shuffles copy if every executor sees that folder, or a root on shared storage (--root s3://..., hdfs://...)"
        )
    if not local_root and _before_spark_4(spark_version) and not _local_master(parsed):
        return (
            f"--keep-shuffles auto keeps nothing on a Spark {(spark_version or '3').split('-')[0]} cluster: its "
            "executors need the sparkrecover jar on their class path; --keep-shuffles copy adds it there (the "
            "jar must then be at the same path on every node)"
        )
    return _not_free(parsed, folder) if local_root else None


def _local_master(parsed: spark_argv.SubmitArgs) -> bool:
    return not parsed.master_unknown and (parsed.master or "local[*]").startswith("local")


def _before_spark_4(version: str | None) -> bool:
    return bool(version) and int((version or "0").split(".")[0]) < 4


def _not_free(parsed: spark_argv.SubmitArgs, folder: str) -> str | None:
    """Why keeping would cost a copy per map output here (``auto`` keeps only links), or None."""
    local_dir = (parsed.conf("spark.local.dir") or os.environ.get("SPARK_LOCAL_DIRS") or tempfile.gettempdir()).split(
        ","
    )[0]
    try:
        same = os.stat(_existing(local_dir)).st_dev == os.stat(_existing(folder)).st_dev
    except OSError:
        same = False
    if not same:
        return (
            f"Spark's local directory {local_dir} is on another filesystem than the run directory, so "
            "keeping map outputs would copy them; --keep-shuffles copy does that"
        )
    return None


def _existing(path: str) -> str:
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path or "/"
