"""``SparkRecoverSubmitOperator``: what docs/launchers.md's macro did by hand, as an operator.

It is the provider's ``SparkSubmitOperator`` (every option of it works: the connection, memory,
packages, ``env_vars``, ...) whose application is sparkrecover's driver bootstrap, built when the
task runs by ``spark-submit-args``' own code (``launch/handoff.py``) for the task instance's run
(``launch/taskruns.py``), with the master and deploy mode of the connection the hook resolved. What
``spark-submit-args`` says goes to the task's log.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from sparkrecover.launch import handoff, taskruns
from sparkrecover.launch.options import RunOptions
from sparkrecover.launch.shuffles import DEFAULT_MODE
from sparkrecover.rundir import storage


class SparkRecoverSubmitOperator(SparkSubmitOperator):
    """Run ``script`` with ``script_args`` under sparkrecover, as run
    ``<dag_id>.<dag run id>.<task_id>`` under ``root``: a retry or a clear of the task resumes its
    run (finished writes skipped, committed partitions kept) or, once it succeeded, runs nothing;
    another DAG run is another run. ``recompute=True`` computes a succeeded run again (as
    ``<run id>.r2``, ...). The other parameters are ``SparkSubmitOperator``'s, but ``application``
    and ``application_args``, which sparkrecover sets.

    :param script: the PySpark application (templated)
    :param script_args: its arguments (templated)
    :param root: where runs live (templated; default ``$SPARKRECOVER_ROOT``, else ``./.sparkrecover``
        of the worker: give shared storage, such as ``s3://bucket/sparkrecover``, when tries may run
        on different workers or the driver in the cluster)
    :param recompute: compute the task instance's run again when it succeeded (templated: a param
        or a DAG run's conf may set it)
    :param keep_shuffles, flush_interval, buffer_size, checksums, checkpoint_root: ``submit``'s
        recording options (docs/commands.md)
    """

    # SparkSubmitOperator's fields this operator fills in (its own types, for the type checker).
    conf: dict[Any, Any] | None
    jars: str | None
    py_files: str | None
    files: str | None
    application: str
    application_args: list[Any] | None

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "script",
        "script_args",
        "root",
        "recompute",
        "checkpoint_root",
    )

    def __init__(
        self,
        *,
        script: str,
        script_args: list[Any] | None = None,
        root: str | None = None,
        recompute: bool | str = False,
        keep_shuffles: str = DEFAULT_MODE,
        flush_interval: float | None = None,
        buffer_size: int | None = None,
        checksums: bool = False,
        checkpoint_root: str | None = None,
        **kwargs: Any,
    ) -> None:
        for taken in ("application", "application_args"):
            if taken in kwargs:
                raise ValueError(f"SparkRecoverSubmitOperator sets {taken} itself: give script= and script_args=")
        super().__init__(**kwargs)
        self.script = script
        self.script_args = script_args
        self.root = root
        self.recompute = recompute
        self.checkpoint_root = checkpoint_root
        defaults = RunOptions()
        self._recording = RunOptions(
            keep_shuffles=keep_shuffles,
            flush_interval=defaults.flush_interval if flush_interval is None else flush_interval,
            buffer_size=defaults.buffer_size if buffer_size is None else buffer_size,
            checksums=checksums,
        )

    def execute(self, context: Any) -> Any:
        hook = self._get_hook()  # resolves the connection: its master is the one spark-submit gets
        connection = hook._connection
        root = storage.resolve_root(self.root)
        task_instance = context["ti"]
        run_id, moved = taskruns.run_for_try(
            root,
            taskruns.task_run_id(
                context["dag"].dag_id, context["run_id"], task_instance.task_id, getattr(task_instance, "map_index", -1)
            ),
            taskruns.truthy(self.recompute),
        )
        if moved:
            self.log.info("sparkrecover: %s", moved)
        options = RunOptions(
            root=self.root,
            spark_submit=shutil.which(connection.get("spark_binary") or "spark-submit"),
            flush_interval=self._recording.flush_interval,
            buffer_size=self._recording.buffer_size,
            checksums=self._recording.checksums,
            checkpoint_root=self.checkpoint_root,
            keep_shuffles=self._recording.keep_shuffles,
        )
        shaping = taskruns.submit_options(
            master=connection["master"],
            deploy_mode=connection.get("deploy_mode"),
            conf=self.conf,
            jars=self.jars,
            py_files=self.py_files,
            files=self.files,
        )
        handed = handoff.handoff(
            root,
            run_id,
            [*shaping, self.script, *[str(arg) for arg in self.script_args or []]],
            options,
            notify=lambda message: self.log.info("sparkrecover spark-submit-args: %s", message),
        )
        self.application = handed.application
        self.application_args = handed.arguments
        self.conf = handed.conf
        self.jars = ",".join(handed.jars) or None
        self.py_files = ",".join(handed.py_files) or None
        self.files = ",".join(handed.files) or None
        self._hook = None  # built again with the bootstrap's fields
        self.log.info("sparkrecover: run %s under %s", run_id, root)
        return super().execute(context)
