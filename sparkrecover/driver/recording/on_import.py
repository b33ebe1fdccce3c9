"""Patching the classes of modules pyspark imports lazily (``pyspark.ml``, ``pyspark.mllib``: they
import numpy, which a script may not have, so sparkrecover never imports them itself).

``watch(tag, watched, patch)`` calls ``patch(module)`` for each watched module already imported,
and, through one import hook first on ``sys.meta_path``, right after a watched module's code ran
when the script imports it. Several watchers may watch one module (model saves and model training
both watch ``pyspark.mllib``'s): each patches it. ``unwatch(tag)`` stops one watching (tests).
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from typing import Any

Watched = Callable[[str], bool]
Patch = Callable[[Any], None]


def watch(tag: str, watched: Watched, patch: Patch) -> None:
    hook = _hook()
    if hook is None:
        hook = PatchOnImport()
        sys.meta_path.insert(0, hook)
    hook.watchers[tag] = (watched, patch)
    for name, module in list(sys.modules.items()):
        if module is not None and watched(name):
            patch(module)


def unwatch(tag: str) -> None:
    hook = _hook()
    if hook is None:
        return
    hook.watchers.pop(tag, None)
    if not hook.watchers:
        sys.meta_path.remove(hook)


def _hook() -> PatchOnImport | None:
    return next((finder for finder in sys.meta_path if isinstance(finder, PatchOnImport)), None)


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders after it, and wraps the loader of a watched module
    so that every watcher's patch runs right after the module's code ran."""

    def __init__(self) -> None:
        self.watchers: dict[str, tuple[Watched, Patch]] = {}

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        patches = [patch for watched, patch in list(self.watchers.values()) if watched(name)]
        if not patches:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, PatchOnImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if loader is not None and hasattr(loader, "exec_module"):
                run = loader.exec_module

                def exec_module(module: Any, run: Any = run) -> None:
                    run(module)
                    for patch in patches:
                        patch(module)

                loader.exec_module = exec_module  # type: ignore[method-assign]  # this spec's own loader
            return spec
        return None
