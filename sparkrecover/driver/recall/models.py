"""Model training recorded and replayed like an action (docs/replay.md, docs/decisions/0051):
the user's ``Estimator.fit(dataset[, params])`` of ``pyspark.ml`` (any estimator, a Pipeline too;
``params`` one map, or a list of maps whose list of models is one result)
and MLlib's RDD-based ``train`` entry points (``KMeans.train``, ``LogisticRegressionWithLBFGS.train``,
``ALS.train``, ...).

- identity: the action rule (``identity.identify``: call site, ordinal, the dataset's fingerprint)
  with the estimator's class and parameters (or the ``train`` call's arguments) as the
  fingerprint's ``code``, so a changed parameter says ``code changed`` and trains again;
- result: the model saved by Spark's own writer into ``<run dir>/results/<attempt>/model-<key>``
  (a list's models into ``model-<key>/<i>``) and a small manifest (each model's class and folder)
  kept as the action's result file, journaled
  (``action.recorded``) only once both are durable. A model with no writer is journaled as not
  kept, with the reason;
- replay: the manifest's class loads the folder with its own loader, ``action.replayed`` says so.

Our save runs as if inside a stage, so ``mlsaves`` does not take it for the user's save. pyspark's
own fits inside the user's (a Pipeline's stages) are part of the user's call, as for actions.
``pyspark.ml`` and ``pyspark.mllib`` are patched when the script imports them (``on_import``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import time
from typing import Any

import orjson

from sparkrecover.core.verdicts import staleness
from sparkrecover.driver.process import runtime
from sparkrecover.driver.recall import actions, codec, identity, recorder
from sparkrecover.driver.recording import hooks, on_import, zerocode
from sparkrecover.rundir import results, storage

_TAG = "model training"
_ML_BASE = "pyspark.ml.base"
_MLLIB_MODULES = tuple(
    f"pyspark.mllib.{name}" for name in ("clustering", "classification", "regression", "recommendation", "fpm", "tree")
)
_TRAIN_METHODS = ("train", "trainImplicit", "trainClassifier", "trainRegressor")
ML, MLLIB = "ml", "mllib"


def install() -> None:
    on_import.watch(_TAG, _watched, _patch_module)


def uninstall() -> None:
    on_import.unwatch(_TAG)


def _watched(name: str) -> bool:
    return name == _ML_BASE or name in _MLLIB_MODULES


def _patch_module(module: Any) -> None:
    if module.__name__ == _ML_BASE:
        hooks.patch(module.Estimator, "fit", _recorded_fit)
        return
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        for name in _TRAIN_METHODS:
            found = vars(cls).get(name)
            # A classmethod, or the method bound to its class that the patch table put back.
            if isinstance(found, classmethod) or (inspect.ismethod(found) and found.__self__ is cls):
                hooks.patch(cls, name, functools.partial(_recorded_train, f"{cls.__name__}.{name}"))
                # Called on the class or an instance alike, as the classmethod was (the patch
                # table keeps the original to put back).
                setattr(cls, name, staticmethod(vars(cls)[name]))


# -- what identifies a training -------------------------------------------------------------------


def described(value: Any) -> Any:
    """A parameter's value as plain JSON that is the same in every attempt: a stage (a Pipeline's)
    by its class and parameters, never its uid; a Param by its name; a vector as its numbers."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "extractParamMap"):
        return {"class": _class_name(type(value)), "params": params_of(value.extractParamMap())}
    if isinstance(value, dict):
        return params_of(value)
    if isinstance(value, (list, tuple)):
        return [described(item) for item in value]
    if hasattr(value, "tolist"):  # numpy arrays, ML and MLlib vectors (toArray first)
        return value.tolist()
    if hasattr(value, "toArray"):
        return value.toArray().tolist()
    shown = repr(value)
    return _class_name(type(value)) if " at 0x" in shown else shown


def params_of(mapping: dict[Any, Any]) -> dict[str, Any]:
    return {str(getattr(key, "name", key)): described(value) for key, value in mapping.items()}


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _canonical(value: Any) -> str:
    """``value`` as JSON with sorted keys: the same text in every attempt (the fingerprint digests it)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# -- the patched calls ----------------------------------------------------------------------------


def _recorded_fit(original: Any) -> Any:
    def fit(self: Any, dataset: Any, params: Any = None) -> Any:
        rt = _recording(sys._getframe(1))
        if rt is None or not _param_maps(params):
            return original(self, dataset, params)
        try:
            given = params_of(params or {}) if not isinstance(params, (list, tuple)) else [params_of(p) for p in params]
            code = [_canonical({"estimator": described(self), "params": given})]
            call = identity.identify(rt, "ml.fit", type(self).__name__, dataset, code)
        except Exception as error:
            actions.warn("fit() not checked for replay", error)
            return original(self, dataset, params)
        return Training(rt, call, ML, dataset.sparkSession.sparkContext).run(lambda: original(self, dataset, params))

    return fit


def _param_maps(params: Any) -> bool:
    """Whether ``fit`` is given what it trains one model for (None, a map) or a list of models for
    (a non-empty list or tuple of maps: pyspark's ``fitMultiple``, its models in the maps' order)."""
    if params is None or isinstance(params, dict):
        return True
    return isinstance(params, (list, tuple)) and bool(params) and all(isinstance(p, dict) for p in params)


def _recorded_train(name: str, original: Any) -> Any:
    signature = inspect.signature(original)

    def train(*args: Any, **kwargs: Any) -> Any:
        rt = _recording(sys._getframe(1))
        if rt is None:
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            (_, data), *rest = bound.arguments.items()
            code = [_canonical({"train": name, "arguments": params_of(dict(rest))})]
            call = identity.identify(rt, "mllib.train", name, zerocode.RDDSource(data), code)
            context = data.context
        except Exception as error:
            actions.warn(f"{name}() not checked for replay", error)
            return original(*args, **kwargs)
        return Training(rt, call, MLLIB, context).run(lambda: original(*args, **kwargs))

    return train  # a classmethod's: ``original`` is already bound to its class


def _recording(caller: Any) -> runtime.Runtime | None:
    """The runtime, when this call is the user's and training is recorded in this run."""
    rt = runtime.current()
    if rt is None or rt.recorder is None or zerocode.is_own_module(str(caller.f_globals.get("__name__") or "")):
        return None
    return rt


class Training:
    """One training call: its model loaded from the plan's record, or trained and saved."""

    def __init__(self, rt: runtime.Runtime, call: identity.Action, api: str, context: Any):
        self.rt, self.call, self.api, self.context = rt, call, api, context

    def run(self, train: Any) -> Any:
        if not self.rt.record_models:
            return train()
        entry, reason = actions.offered(self.rt, self.call)
        if entry is not None:
            try:
                return self._replay(entry)
            except Exception as error:
                actions.warn(f"the model of {self.call.key} not loaded", error)
                reason = f"its model could not be loaded: {error}"
        started = time.monotonic()
        model = train()
        self._keep(model, time.monotonic() - started, reason)
        return model

    def _replay(self, entry: Any) -> Any:
        started = time.monotonic()
        if entry.path is None or entry.sha256 is None:
            raise ValueError("no model recorded")
        data = storage.read_bytes(results.url_of(self.rt.run_dir, entry.path))
        _, manifest = recorder.decode(data, entry.sha256, entry.path)
        if "models" in manifest:  # a fit given a list of param maps
            models = [self._load(dict(kept, api=manifest["api"])) for kept in manifest["models"]]
            first = manifest["models"][0]["class"]
            actions.journal_replayed(self.rt, self.call, entry, started, rows=None, model=first, models=len(models))
            return models
        model = self._load(manifest)
        actions.journal_replayed(self.rt, self.call, entry, started, rows=None, model=manifest["class"])
        return model

    def _load(self, manifest: dict[str, Any]) -> Any:
        module, _, name = str(manifest["class"]).rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        where = storage.to_spark_path(results.url_of(self.rt.run_dir, str(manifest["folder"])))
        if manifest["api"] != MLLIB:
            return cls.load(where)
        return _as_trained(cls.load(self.context, where))

    def _keep(self, trained: Any, seconds: float, reason: str) -> None:
        """Save the model (each of a list's) and journal the manifest naming its class and folder."""
        many = isinstance(trained, list)
        models = trained if many else [trained]
        names = sorted({type(model).__name__ for model in models})
        shown = f"{len(models)} models {', '.join(names)}" if many else f"model {names[0]}"
        payload = dict(actions.recorded_payload(self.call, seconds, reason), summary=shown)
        if many:
            payload["models"] = len(models)
        assert self.rt.recorder is not None
        why = next((why for why in (_not_writable(model, self.api) for model in models) if why), None)
        if why is not None:
            self.rt.recorder.record(dict(payload, not_kept=why), None)
            return
        folder = f"{results.FOLDER}/{self.rt.writer.attempt:04d}/model-{staleness.digest(self.call.key)[:16]}"
        folders = [f"{folder}/{index}" for index in range(len(models))] if many else [folder]
        try:
            for model, where in zip(models, folders, strict=True):
                self._save(model, storage.to_spark_path(results.url_of(self.rt.run_dir, where)))
        except Exception as error:
            actions.warn(f"the model of {self.call.key} not kept", error)
            self.rt.recorder.record(dict(payload, not_kept=f"its save failed: {type(error).__name__}"), None)
            return
        try:  # what the model keeps on storage, said by inspect (the result file is a few bytes)
            payload["model_bytes"] = results.folder_bytes(self.rt.run_dir, folder)
        except Exception:  # a listing that fails leaves the size unsaid, never the fit failed
            pass
        kept = [
            {"class": _class_name(type(model)), "folder": where} for model, where in zip(models, folders, strict=True)
        ]
        manifest = codec.encode_value({"api": self.api, "models": kept} if many else {"api": self.api, **kept[0]})
        self.rt.recorder.record(payload, lambda: recorder.encode(recorder.VALUE, manifest, None, 1 << 20))

    def _save(self, model: Any, where: str) -> None:
        """Spark's own writer, as if inside a stage: the user's-save hooks (``mlsaves``, the write
        hooks) leave it alone, and no declared stage's expected write takes it for its own."""
        declared = self.rt.expected_write()
        self.rt.enter_stage()
        self.rt.expect_write(None)
        try:
            if self.api == MLLIB:
                model.save(self.context, where)
            else:
                model.write().overwrite().save(where)
        finally:
            self.rt.expect_write(declared)
            self.rt.leave_stage()


def _not_writable(model: Any, api: str) -> str | None:
    name = type(model).__name__
    if api == MLLIB:
        saveable = getattr(sys.modules.get("pyspark.mllib.util"), "Saveable", None)
        if saveable is None or not isinstance(model, saveable) or not hasattr(type(model), "load"):
            return f"{name} cannot be saved and loaded by MLlib: trains again on resume"
        return None
    if not callable(getattr(model, "write", None)) or not hasattr(type(model), "load"):
        return f"{name} is not MLWritable and MLReadable: trains again on resume"
    return None


def _as_trained(model: Any) -> Any:
    """An MLlib model as its ``train`` returns it. Some of pyspark's loaders keep a JVM method where
    ``train`` keeps its value (``IsotonicRegressionModel.load`` keeps ``java_model.isotonic``, never
    called): such a model cannot be pickled into a closure (``rdd.map(lambda p: model.predict(p))``,
    as Spark's isotonic example does), which the trained one can. The value is taken."""
    from py4j.java_gateway import JavaMember

    for name, value in list(vars(model).items()):
        if isinstance(value, JavaMember):
            setattr(model, name, value())
    return model
