"""The tests' stand-in for HDFS on the command line's side: fsspec's ``viewfs://`` over a local folder.

A test that needs a Hadoop filesystem which is not ``file:`` but renames atomically points Spark at
Hadoop's own ViewFileSystem with a fallback link to a local folder
(``spark.hadoop.fs.viewfs.mounttable.<name>.linkFallback=file:///<folder>``): the driver then reaches
``viewfs://<name>/...`` through Hadoop's FileSystem API, as it reaches ``hdfs://``. The command line
reads through fsspec, which has no viewfs: with this folder on ``PYTHONPATH`` its entry point
(``sparkrecover_test_hdfslike-0.dist-info``) registers this class for ``viewfs://``, mapping
``viewfs://<name>/<path>`` to ``<folder>/<path>`` where ``$SPARKRECOVER_TEST_VIEWFS`` is
``<name>=<folder>``.
"""

from __future__ import annotations

import os

from fsspec.implementations.local import LocalFileSystem

ENV = "SPARKRECOVER_TEST_VIEWFS"


class ViewFsLocal(LocalFileSystem):
    protocol = ("viewfs",)
    root_marker = "/"

    def __init__(self, *args, **kwargs):
        # A write makes its parent folders, as HDFS's create does.
        kwargs.setdefault("auto_mkdir", True)
        super().__init__(*args, **kwargs)

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        if path.startswith("viewfs://"):
            name, _, rest = path[len("viewfs://") :].partition("/")
            mounts = dict(item.split("=", 1) for item in os.environ.get(ENV, "").split(",") if "=" in item)
            if name not in mounts:
                raise FileNotFoundError(f"viewfs://{name}/ has no folder in ${ENV}")
            path = os.path.join(mounts[name], rest)
        return super()._strip_protocol(path)
