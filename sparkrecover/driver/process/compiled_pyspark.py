"""Import pyspark from its installed package, not from the zip spark-submit puts first on the path.

spark-submit starts a Python driver (and an executor its Python workers) with
``$SPARK_HOME/python/lib/pyspark.zip`` first on ``PYTHONPATH``. With pip's pyspark, that zip sits
inside the installed package itself (``site-packages/pyspark/python/lib/pyspark.zip``), holds the
same sources, and no compiled files: Python compiles every pyspark module it imports from it, each
time a process starts. Measured on this project's 2-core machine (pyspark 4, Python 3.11):
``import pyspark.sql`` from the zip 1.3-1.4 s of CPU, from the installed package 0.3 s
(docs/decisions/0040-pyspark-from-compiled-files.md). So when the zip is the installed package's
own, ``pyspark`` is found in that package, whose compiled files Python keeps; any other layout (a
Spark distribution's ``$SPARK_HOME/python``, a zip of another Spark) is left as it is. Only the
name ``pyspark`` is redirected, and nothing else on ``sys.path`` moves.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType


class _InstalledPyspark(importlib.abc.MetaPathFinder):
    """Finds ``pyspark`` in ``package`` (its submodules then follow ``pyspark.__path__``)."""

    def __init__(self, package: str):
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "pyspark":
            return None
        return importlib.util.spec_from_file_location(
            "pyspark", os.path.join(self.package, "__init__.py"), submodule_search_locations=[self.package]
        )


def installed_package_of(zip_path: str) -> str | None:
    """The installed pyspark package directory ``zip_path`` is the zip of, or None."""
    if os.path.basename(zip_path) != "pyspark.zip":
        return None
    lib = os.path.dirname(os.path.abspath(zip_path))
    package = os.path.dirname(os.path.dirname(lib))
    if os.path.basename(os.path.dirname(lib)) != "python" or os.path.basename(lib) != "lib":
        return None
    if os.path.basename(package) != "pyspark" or not os.path.isfile(os.path.join(package, "__init__.py")):
        return None
    return package


def installed_first(path: list[str]) -> str | None:
    """The installed pyspark package whose own zip is the first pyspark on ``path``, or None (no
    such zip, another Spark's zip, or a pyspark directory first)."""
    for entry in path:
        if os.path.basename(entry) == "pyspark.zip":
            return installed_package_of(entry)  # None: another Spark's zip comes first, and stays first
        if entry.endswith(".zip"):
            continue  # py4j's, the script's --py-files
        if os.path.isfile(os.path.join(entry or ".", "pyspark", "__init__.py")):
            return None  # a pyspark of its own comes first: it is the one the process expects
    return None


def prefer_compiled() -> str | None:
    """Have ``import pyspark`` load the installed package when the first pyspark on ``sys.path``
    is that package's own zip; returns the package directory, or None when nothing changed
    (pyspark already imported, this done before, or ``installed_first`` finds none)."""
    if "pyspark" in sys.modules or any(isinstance(finder, _InstalledPyspark) for finder in sys.meta_path):
        return None
    package = installed_first(sys.path)
    if package is not None:
        sys.meta_path.insert(0, _InstalledPyspark(package))
    return package
