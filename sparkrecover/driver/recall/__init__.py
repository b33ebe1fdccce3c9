"""The driver's past replayed (docs/design.md §4c, docs/replay.md): actions' results recorded in
the run directory and handed back to a resumed driver instead of running their Spark jobs.

``actions`` patches pyspark's actions, ``identity`` names an action across attempts, ``recorder``
keeps and reads the result files, ``codec`` turns results into typed JSON and back. ``start`` and
``stop`` bracket an attempt: the run's Spark conf may turn it off (``spark.sparkrecover.replay``),
model training alone (``spark.sparkrecover.replay.models``), or change the size limit
(``spark.sparkrecover.results.maxBytes``).
"""

from __future__ import annotations

import re
from typing import Any

from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recall import recorder

REPLAY_CONF = "spark.sparkrecover.replay"
MODELS_CONF = "spark.sparkrecover.replay.models"  # false: actions replayed, model training not
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def size_of(text: str) -> int:
    """Bytes in a size as Spark's confs spell it (``8m``, ``512k``, ``1048576``)."""
    found = _SIZE.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a size (e.g. 8m, 512k, 1048576)")
    return int(found.group(1)) << (10 * " kmgt".index(found.group(2).lower() or " "))


def start(rt: runtime.Runtime, conf: Any) -> None:
    """Once the script's SparkContext exists: record and replay unless the run's conf says not."""
    if str(conf.get(REPLAY_CONF, "true")).strip().lower() == "false":
        rt.results.clear()
        return
    rt.record_models = str(conf.get(MODELS_CONF, "true")).strip().lower() != "false"
    limit = conf.get(recorder.LIMIT_CONF, None)
    if limit is not None:
        try:
            rt.result_limit = size_of(str(limit))
        except ValueError as error:
            messages.say(f"sparkrecover: warning: {recorder.LIMIT_CONF}: {error}; the default 8m is used")
    rt.recorder = recorder.Recorder(rt.writer, rt.run_dir, rt.writer.attempt)


def stop(rt: runtime.Runtime) -> None:
    """Before ``driver.ended``: the results queued so far are written and journaled."""
    if rt.recorder is not None:
        rt.recorder.close()
