"""sparkrecover: make long PySpark batch jobs survive driver crashes.

Inside a Spark application::

    import sparkrecover as sr
    clean = sr.checkpoint("clean", lambda: spark.read.json(raw).where("amount > 0"))

The API is imported lazily so that the CLI starts without importing pyspark.
"""

from __future__ import annotations

from typing import Any

from sparkrecover.version import __version__

__all__ = ["__version__", "checkpoint", "stage"]


def __getattr__(name: str) -> Any:
    if name in ("checkpoint", "stage"):
        from sparkrecover.driver import api

        return getattr(api, name)
    raise AttributeError(f"module 'sparkrecover' has no attribute {name!r}")
