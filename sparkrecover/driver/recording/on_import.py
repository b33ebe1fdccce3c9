"""Patching the classes of modules pyspark imports lazily (``pyspark.ml``, ``pyspark.mllib``: they
import numpy, which a script may not have, so sparkrecover never imports them itself).

``watch(tag, watched, patch)`` calls ``patch(module)`` for each watched module already imported,
and puts an import hook first on ``sys.meta_path`` that calls it right after a watched module's
code ran when the script imports it. ``unwatch(tag)`` stops watching (tests).
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from typing import Any


def watch(tag: str, watched: Callable[[str], bool], patch: Callable[[Any], None]) -> None:
    if not any(isinstance(finder, PatchOnImport) and finder.tag == tag for finder in sys.meta_path):
        sys.meta_path.insert(0, PatchOnImport(tag, watched, patch))
    for name, module in list(sys.modules.items()):
        if module is not None and watched(name):
            patch(module)


def unwatch(tag: str) -> None:
    sys.meta_path[:] = [
        finder for finder in sys.meta_path if not (isinstance(finder, PatchOnImport) and finder.tag == tag)
    ]


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders after it, and wraps the loader of a watched module
    so its classes are patched right after the module's code ran."""

    def __init__(self, tag: str, watched: Callable[[str], bool], patch: Callable[[Any], None]):
        self.tag, self.watched, self.patch = tag, watched, patch

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if not self.watched(name):
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
                    self.patch(module)

                loader.exec_module = exec_module  # type: ignore[method-assign]  # this spec's own loader
            return spec
        return None
