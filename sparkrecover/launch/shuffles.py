"""Keeping shuffle map outputs: the spark-submit settings that install the keeping shuffle
manager (sparkrecover/jvm/KeepingShuffleManager.java), and the list of kept map outputs a resumed
attempt may reuse (docs/shuffles.md). The keep folder itself (where, its disk use, its removal)
is ``rundir/keep.py``'s.

``--keep-shuffles``:
- ``auto`` (the default): keep them where it costs nothing, as hard links: a local master whose
  Spark local directory is on the filesystem of the run directory. Elsewhere, off.
- ``link``: hard links only; a map output whose link fails is not kept.
- ``copy``: copies (measured in docs/shuffles.md): for a keep folder on another filesystem.
- ``off``: Spark's own shuffle manager, nothing kept.

Never installed over a shuffle manager the user chose (a remote shuffle service such as Celeborn or
Uniffle sets one), with push-based shuffle, under Spark Connect, or for a run directory that is
not a local folder: each of those is said once and journaled as ``shuffle.unsupported``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from sparkrecover.core import staleness
from sparkrecover.jvm import (
    FALLBACK_PATH_CONF,
    SHUFFLE_DIR_CONF,
    SHUFFLE_MANAGER_CLASS,
    SHUFFLE_MANAGER_CONF,
    SHUFFLE_MODE_CONF,
    SHUFFLE_REUSE_CONF,
    SHUFFLE_SCRIPT_CONF,
)
from sparkrecover.launch import launcher
from sparkrecover.rundir import keep, storage
from sparkrecover.rundir.plans import KeptShuffle

MODES = ("auto", "link", "copy", "off")
DEFAULT_MODE = "auto"
FALLBACK = ".fallback"  # FallbackStorage's root, inside the keep folder


@dataclass
class Setup:
    """What one attempt does about shuffles: the options to add, or why nothing is kept."""

    options: list[str] = field(default_factory=list)
    mode: str = "off"
    reason: str | None = None  # set when keeping was asked for (or automatic) and cannot be done


def setup(
    parsed: launcher.SubmitArgs,
    run_dir: str,
    mode: str,
    *,
    jar: str | None,
    reuse: list[KeptShuffle] | None = None,
    attempt: int = 1,
) -> Setup:
    """The options that keep this attempt's map outputs (and reuse the plan's kept ones)."""
    if mode == "off":
        return Setup()
    reason = _unsupported(parsed, jar)
    folder = keep.folder(run_dir)
    if reason is None and folder is None:
        reason = f"the run directory {run_dir} is not a local folder"
    if reason is None and mode == "auto":
        reason = _not_free(parsed, folder or "")
    if reason is not None:
        return Setup(reason=reason)
    folder = keep.create(run_dir)
    assert folder is not None
    effective = "copy" if mode == "copy" else "link"
    confs = {
        SHUFFLE_MANAGER_CONF: SHUFFLE_MANAGER_CLASS,
        SHUFFLE_DIR_CONF: folder,
        SHUFFLE_MODE_CONF: effective,
        SHUFFLE_SCRIPT_CONF: staleness.script_digest(parsed.app, storage.read_bytes),
        FALLBACK_PATH_CONF: os.path.join(folder, FALLBACK) + "/",
    }
    if reuse:
        confs[SHUFFLE_REUSE_CONF] = keep.write_reuse_list(run_dir, attempt, reuse)
    options: list[str] = []
    for key, value in confs.items():
        options += ["--conf", f"{key}={value}"]
    return Setup(options=options, mode=effective)


def _unsupported(parsed: launcher.SubmitArgs, jar: str | None) -> str | None:
    own = parsed.conf(SHUFFLE_MANAGER_CONF)
    if own:
        return f"the application sets its own shuffle manager ({own}), e.g. a remote shuffle service"
    if launcher.spark_connect(parsed):
        return "the application talks to Spark Connect, whose server runs the shuffles"
    if (parsed.conf("spark.shuffle.push.enabled") or "").strip().lower() == "true":
        return "push-based shuffle (spark.shuffle.push.enabled) merges map outputs on remote services"
    if (parsed.conf("spark.io.encryption.enabled") or "").strip().lower() == "true":
        return "spark.io.encryption.enabled: shuffle files are encrypted with a key of one application"
    if jar is None:
        return "the sparkrecover jar is not available (no JDK to compile it)"
    return None


def _not_free(parsed: launcher.SubmitArgs, folder: str) -> str | None:
    """Why keeping would cost a copy per map output here (``auto`` keeps only links), or None."""
    master = parsed.master or "local[*]"
    if not master.startswith("local"):
        return (
            f"--keep-shuffles auto keeps map outputs only with a local master (this one is {master}): "
            "executors elsewhere would copy each map output; --keep-shuffles copy does that"
        )
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
