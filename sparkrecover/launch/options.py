"""sparkrecover's own options of ``submit``, ``spark-submit-args`` and ``resume``, as one object:
the command line builds it once from what it parsed, it checks itself, and it is passed down
whole, so that an option added later is added here and to the commands' parameters only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sparkrecover.errors import UsageError
from sparkrecover.journal.writer import DEFAULT_BUFFER_SIZE, DEFAULT_FLUSH_INTERVAL
from sparkrecover.launch import attempts, launcher, shuffles, spark_argv
from sparkrecover.rundir import storage


@dataclass
class RunOptions:
    """What the user gave sparkrecover (a command takes those of its own parameters that are here;
    the others keep their defaults)."""

    root: str | None = None  # as given: hints repeat it (``storage.resolve_root`` finds the folder)
    spark_submit: str | None = None
    max_attempts: int = 1
    # --json: one JSON document on stdout, the application's own stdout on stderr
    json_output: bool = False
    # How a run is journaled and launched: submit records them in run.started (resume takes them
    # from there), spark-submit-args writes them into the line it hands on.
    flush_interval: float = DEFAULT_FLUSH_INTERVAL
    buffer_size: int = DEFAULT_BUFFER_SIZE
    checksums: bool = False
    checkpoint_root: str | None = None  # normalized: an fsspec URL
    keep_shuffles: str = shuffles.DEFAULT_MODE

    def __post_init__(self) -> None:
        if self.keep_shuffles not in shuffles.MODES:
            raise UsageError(f"--keep-shuffles {self.keep_shuffles}: expected one of {', '.join(shuffles.MODES)}")
        self.checkpoint_root = storage.normalize(self.checkpoint_root) if self.checkpoint_root else None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunOptions:
        """From a command's parsed parameters (by name; the command's own others are ignored)."""
        names = {option.name for option in fields(cls)}
        return cls(**{name: value for name, value in params.items() if name in names})

    def application(self, args: list[str], root: str) -> spark_argv.SubmitArgs:
        """``args`` (``[spark-submit options] app.py [app args]``) split and checked: a Python
        application, and in cluster mode a root (resolved) and checkpoint root the driver can reach."""
        parsed = spark_argv.split_submit_args(args)
        spark_argv.check_application(parsed)
        if parsed.deploy_mode == "cluster":
            for option, where in (("--root", root), ("--checkpoint-root", self.checkpoint_root)):
                if where is not None and launcher_is_local_root(where):
                    raise UsageError(
                        f"--deploy-mode cluster needs {option} on shared storage (s3://, hdfs://, "
                        f"...): the driver runs on the cluster and cannot write to {where}"
                    )
        return parsed

    def launch_spec(self, parsed: spark_argv.SubmitArgs, spark_submit: str | None = None) -> attempts.LaunchSpec:
        """The first attempt's launch of ``parsed`` with these options (``spark_submit``: the one
        already found, else found now)."""
        return attempts.LaunchSpec(
            spark_submit=spark_submit or launcher.find_spark_submit(self.spark_submit),
            submit_args=parsed,
            flush_interval=self.flush_interval,
            buffer_size=self.buffer_size,
            checksums=self.checksums,
            checkpoint_root=self.checkpoint_root,
            keep_shuffles=self.keep_shuffles,
        )


def launcher_is_local_root(root: str) -> bool:
    """A root the driver of a cluster could not reach: this machine's disk, or this process's
    memory (``memory://`` lives and dies with one Python process)."""
    return storage.is_local(root) or storage.scheme_of(root) == "memory"
