"""The schema ``spark.createDataFrame(rdd)`` infers, replayed (docs/replay.md): without a schema
(or with column names only) pyspark runs ``rdd.first()`` — or, with ``samplingRatio``, a sampled
pass — inside its own ``SparkSession._inferSchema``. Being pyspark's call, that job is no action
of the user's (``actions`` leaves it alone), so a resumed driver would run it again.

The user's ``createDataFrame`` (``rdd.toDF()`` goes through it) is treated as an action whose
result is the inferred ``StructType``, kept as Spark's JSON of it: named by the user's line and its
arguments, fingerprinted by the RDD's lineage and input files (as RDD actions are), recorded,
replayed, and said like every other action. The session settings pyspark's inference reads are in
the fingerprint as its code: another setting infers again.
"""

from __future__ import annotations

from typing import Any

from sparkrecover.driver.process import runtime
from sparkrecover.driver.recall import actions, identity, recorder
from sparkrecover.driver.recording import hooks, zerocode

KIND = actions.Kind("createDataFrame", recorder.VALUE)
# What pyspark's _inferSchema reads of the session besides the rows (pyspark 3.5 and 4).
_INFERENCE_CONF = (
    "spark.sql.timestampType",
    "spark.sql.pyspark.inferNestedDictAsStruct.enabled",
    "spark.sql.pyspark.legacy.inferArrayTypeFromFirstElement.enabled",
    "spark.sql.pyspark.legacy.inferMapTypeFromFirstPair.enabled",
)


def install() -> None:
    from pyspark.sql import SparkSession

    if hasattr(SparkSession, "_inferSchema"):  # pyspark's own: absent from Spark Connect's session
        hooks.patch(SparkSession, "_inferSchema", _infer)


def _infer(original: Any) -> Any:
    def infer(self: Any, rdd: Any, samplingRatio: Any = None, names: Any = None) -> Any:
        from pyspark.sql.types import StructType

        def live() -> Any:
            return original(self, rdd, samplingRatio, names)

        rt = runtime.current()
        if rt is None or rt.recorder is None:
            return live()
        try:
            conf = [f"{name}={self.conf.get(name, None)}" for name in _INFERENCE_CONF]
            call = identity.identify(
                rt, KIND.name, f"samplingRatio={samplingRatio!r}, names={names!r}", zerocode.RDDSource(rdd), conf
            )
        except Exception as error:
            actions.warn("createDataFrame()'s schema not checked for replay", error)
            return live()
        found = actions.Call(rt, KIND, call, recorder.VALUE, rdd).run(lambda: live().jsonValue())
        return StructType.fromJson(found)

    return infer
