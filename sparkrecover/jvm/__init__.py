"""The JVM classes sparkrecover ships, as Java sources compiled on first use into one jar for
the Spark in use (``launch/listener_jar.py``), and the names both processes refer to them by."""

from __future__ import annotations

import glob
import os

FOLDER = os.path.dirname(os.path.abspath(__file__))
LISTENER_CLASS = "sparkrecover.jvm.SparkRecoverListener"
# spark.shuffle.manager when map outputs are kept (launch/shuffles.py, docs/shuffles.md).
SHUFFLE_MANAGER_CLASS = "sparkrecover.jvm.KeepingShuffleManager"


def sources() -> list[str]:
    """Every Java source of the jar, in a stable order (the jar's cache key digests them all)."""
    return sorted(glob.glob(os.path.join(FOLDER, "*.java")))
