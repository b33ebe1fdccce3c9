"""Model and pipeline saves as implicit stages (zero-code mode).

MLlib's ``model.save(sc, path)`` and ML's ``model.save(path)``, ``model.write().save(path)``,
``.write().overwrite().save(path)`` (``Pipeline`` and ``PipelineModel`` too) write from inside the
JVM: metadata through an RDD's ``saveAsTextFile``, data through DataFrame writes, past pyspark's
writers that ``zerocode`` hooks. So the Python methods that start a save are hooked instead, and
each save is one implicit stage whose output is the whole model folder, named like every implicit
write (``<file>:<line>#<n> <mode> <path>``): skipped when committed and intact; run again when
not, after the folder a dead attempt half wrote is removed (docs/decisions/0029-model-saves.md).

``pyspark.ml`` and ``pyspark.mllib`` import numpy, which a script may not have: they are never
imported here. Their classes are patched when the script imports them (an import hook watching
their module names), or at ``install`` when they are already imported.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recording import hooks, on_import, writes, zerocode

_TAG = "model saves"
_ML_UTIL = "pyspark.ml.util"
_MLLIB = "pyspark.mllib"
# ML's writers that define save: the base (Pipeline, PipelineModel, Python-defined stages) and the
# one that hands the save to the JVM. ``MLWritable.save`` calls ``write().save``: not hooked twice.
_ML_WRITERS = ("MLWriter", "JavaMLWriter")
# The name a stage of a save shows as its mode: MLlib refuses an existing folder (errorifexists),
# ML's ``overwrite()`` replaces it.
_CREATE, _OVERWRITE = "errorifexists", "overwrite"


def install() -> None:
    """Hook the saves of pyspark.ml and pyspark.mllib: now for modules already imported, and for
    the others when they are (through the patch table of ``driver/recording/hooks.py``, whose ``uninstall``
    restores the methods; ``uninstall`` here stops watching imports)."""
    on_import.watch(_TAG, _watched, _patch_module)


def uninstall() -> None:
    on_import.unwatch(_TAG)


def _watched(name: str) -> bool:
    return name == _ML_UTIL or name.startswith(_MLLIB + ".")


def _patch_module(module: Any) -> None:
    for cls in _save_classes(module):
        hooks.patch(cls, "save", _recorded_save)


def _save_classes(module: Any) -> list[type]:
    """The classes of a watched module whose own ``save`` writes a model folder."""
    name = module.__name__
    if name == _ML_UTIL:
        return [getattr(module, cls) for cls in _ML_WRITERS if hasattr(module, cls)]
    saveable = getattr(sys.modules.get(_MLLIB + ".util"), "Saveable", None)
    if saveable is None:
        return []
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == name
        and value is not saveable  # its save only raises NotImplementedError
        and issubclass(value, saveable)
        and "save" in vars(value)
    ]


def _recorded_save(original: Any) -> Any:
    signature = inspect.signature(original)

    def save(self: Any, *args: Any, **kwargs: Any) -> Any:
        rt = runtime.current()
        if rt is None or rt.in_stage:  # a pipeline's stages save inside the pipeline's save
            return original(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
            call = describe(self, bound)
        except Exception as error:  # a wrong call gets pyspark's own error; ours never breaks it
            if not isinstance(error, TypeError):
                messages.say(f"sparkrecover: warning: model save not recorded: {type(error).__name__}: {error}")
            return original(self, *args, **kwargs)
        return writes.run(rt, call, lambda: original(self, *args, **kwargs))

    return save


def describe(saver: Any, bound: dict[str, Any]) -> writes.Write:
    """The implicit stage of one save: ``saver`` is an ML writer or an MLlib model."""
    path = bound["path"]
    if not isinstance(path, str):
        raise TypeError("path should be a string")  # pyspark raises it, from the original call
    source = ModelSource(saver, bound.get("sc"))
    overwrite = _overwrites(saver)
    mode = _OVERWRITE if overwrite else _CREATE
    return zerocode.folder_write(source, path, mode, writes.OVERWRITE if overwrite else writes.CREATE)


def _overwrites(saver: Any) -> bool:
    """Whether an ML writer was told ``overwrite()``. pyspark keeps it in ``shouldOverwrite`` for
    Python writers; a JavaMLWriter passes it to the JVM writer, whose flag is read back (Scala's
    protected members are public in the class file)."""
    if bool(getattr(saver, "shouldOverwrite", False)):
        return True
    jwrite = getattr(saver, "_jwrite", None)
    if jwrite is None:
        return False
    try:
        return bool(jwrite.shouldOverwrite())
    except Exception:
        return False


class ModelSource:
    """What ``writes.run`` needs of what is saved, for a model: its SparkContext (as
    ``spark.sparkContext``), a plan to fingerprint and the files it reads (none known: a model's
    training data is behind it, not in it)."""

    def __init__(self, saver: Any, sc: Any = None):
        self.saver = saver
        self.sparkContext = sc if sc is not None else _context(saver)

    def canonical_plan(self) -> str:
        # What is saved, not how it was trained: the class (of the model, or of the writer and the
        # JVM object it writes) and, for ML, its parameters.
        parts = [type(self.saver).__module__ + "." + type(self.saver).__qualname__]
        instance = getattr(self.saver, "instance", None)
        if instance is not None:
            parts.append(type(instance).__module__ + "." + type(instance).__qualname__)
        jwrite = getattr(self.saver, "_jwrite", None)
        if jwrite is not None:
            try:
                parts.append(str(jwrite.getClass().getName()))
            except Exception:
                pass
        return "\n".join(parts)

    def inputFiles(self) -> list[str]:  # the name DataFrame.inputFiles has
        return []


def _context(saver: Any) -> Any:
    from pyspark import SparkContext

    try:
        session = saver.sparkSession  # ML writers: the session they write with
        if session is not None:
            return session.sparkContext
    except Exception:
        pass
    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("no active SparkContext")
    return sc
