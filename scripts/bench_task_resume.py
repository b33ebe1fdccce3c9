"""Task-level resume (docs/design.md §9): one write of 80 partitions of about 1 s each, killed after
50 %, 70 % and 90 % of its partitions committed, then resumed.

    .venv/bin/python scripts/bench_task_resume.py [--partitions 80] [--seconds 1.0] [--at 0.9 ...]
        [--store s3a [--committer magic]]

With ``--store s3a`` the write goes to S3 through s3a (a moto server on loopback, started here; the
hadoop-aws jars scripts/fetch_s3a_jars.py fetches), where a task commit and the job commit copy
every file, and the resume keeps the committed task folders where the dead job left them. With
``--committer magic`` too, the sparkrecover runs write through hadoop-aws's magic committer, bound
as Spark's docs bind it (PathOutputCommitProtocol, which sparkrecover stands in for): nothing is
copied, and the resume adopts the dead job's pendingsets; the plain run, which has no
spark-hadoop-cloud for that binding, keeps the classic committer.

1. The app (tests/apps/one_write.py: one Parquet write, each partition's first row sleeps) under
   ``sparkrecover submit``, uninterrupted: the full run.
2. The same under plain ``spark-submit``: what a plain re-submission after a crash costs.
3. For each fraction: ``sparkrecover submit``, its process group SIGKILLed once that fraction of
   the partitions has journaled its task commit; then ``sparkrecover resume``, timed from launch
   to exit, counting the partitions it computed (the app marks each partition it computes).

Prints, per fraction, the partitions the resume computed and resume wall / full-run wall.
Goals: at 70 %, at most 30 % + 4 partitions computed and a ratio of at most 0.60; at 90 %, a
ratio of at most 0.35. Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import _bench

APP = os.path.join(_bench.REPO, "tests", "apps", "one_write.py")
GOALS = {0.7: 0.60, 0.9: 0.35}
MAGIC = [
    "--conf",
    "spark.hadoop.fs.s3a.committer.name=magic",
    "--conf",
    "spark.hadoop.fs.s3a.committer.magic.enabled=true",
    "--conf",
    "spark.sql.sources.commitProtocolClass=org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
]


def computed_partitions(run_dir: str, attempt: int) -> int:
    """Partitions ``attempt`` computed and committed, as the run's own fold reads the journal
    (partitions kept from an earlier attempt are not counted)."""
    from sparkrecover.core.fold.runstate import RunState
    from sparkrecover.journal import read_journal

    state = RunState.from_events(os.path.basename(run_dir), read_journal(run_dir))
    return sum(1 for stage in state.stages.values() for by, _ in stage.committed_tasks.values() if by == attempt)


def marked_since(markers: str, since_ns: int) -> int:
    return len({name.split("-")[0] for name in os.listdir(markers) if int(name.split("-")[1]) > since_ns})


class S3aStore:
    """A moto server on loopback and Spark's settings to reach it (tests/e2e/test_e2e_s3.py's)."""

    def __init__(self) -> None:
        sys.path.insert(0, _bench.REPO)
        from tests.e2e.test_e2e_s3 import s3a_jars, s3a_options
        from tests.s3server import MotoS3

        if not s3a_jars():
            sys.exit("no hadoop-aws jars: run .venv/bin/python scripts/fetch_s3a_jars.py")
        self.server = MotoS3()
        self.prefix = "s3a://" + self.server.create_bucket() + "/" + self.server.unique_prefix().rsplit("/", 1)[1]
        self.options = s3a_options(self.server.endpoint)
        self.env = self.server.env()

    def out(self, name: str) -> str:
        return f"{self.prefix}/{name}/out"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=80)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument(
        "--at",
        type=float,
        action="append",
        metavar="FRACTION",
        help="kill after this fraction of the commits (repeatable; default 0.5, 0.7, 0.9)",
    )
    parser.add_argument("--store", choices=("local", "s3a"), default="local", help="where the write goes")
    parser.add_argument("--committer", choices=("classic", "magic"), default="classic", help="with --store s3a")
    options = parser.parse_args()
    if options.committer == "magic" and options.store != "s3a":
        parser.error("--committer magic needs --store s3a")
    _bench.warm_jar()
    parts = options.partitions
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-task-resume-")
    log, root = os.path.join(work, "runs.log"), os.path.join(work, "root")
    s3a = S3aStore() if options.store == "s3a" else None
    env = {**os.environ, **(s3a.env if s3a else {}), "ONE_WRITE_SLEEP": str(options.seconds)}
    plain_options = [*_bench.SPARK_OPTIONS, *(s3a.options if s3a else [])]
    spark_options = [*plain_options, *(MAGIC if options.committer == "magic" else [])]
    print(
        f"bench_task_resume: one write of {parts} partitions x {options.seconds:.1f} s on local[2] "
        f"to {'s3a:// (moto on loopback)' if s3a else 'a local folder'}"
        f"{' through the magic committer' if options.committer == 'magic' else ''} "
        f"{_bench.load_note()}; logs in {log}",
        flush=True,
    )

    def app(name: str) -> list[str]:
        out = s3a.out(name) if s3a else os.path.join(work, name, "out")
        return [APP, out, os.path.join(work, name, "markers"), str(parts)]

    full = _bench.timed(
        _bench.sparkrecover("submit", "--root", root, "--run-id", "full", "--", *spark_options, *app("full")),
        log,
        env,
    )
    print(f"  full run under sparkrecover submit: {full:.2f} s", flush=True)
    plain = _bench.timed([_bench.spark_submit(), *plain_options, *app("plain")], log, {**_bench.plain_env(), **env})
    print(
        f"  plain re-submission (plain spark-submit, whole write): {plain:.2f} s = {plain / full:.3f} x the full run",
        flush=True,
    )

    for fraction in options.at or (0.5, 0.7, 0.9):
        name = f"kill{int(fraction * 100)}"
        run_dir, target = os.path.join(root, name), round(parts * fraction)
        command = _bench.sparkrecover(
            "submit",
            "--root",
            root,
            "--run-id",
            name,
            "--flush-interval",
            "0.2",
            "--",
            *spark_options,
            *app(name),
        )
        with open(log, "ab") as handle:
            child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env)
            while computed_partitions(run_dir, 1) < target:
                if child.poll() is not None:
                    sys.exit(f"the run ended (exit {child.returncode}) before {target} task commits; see {log}")
                time.sleep(0.05)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        killed_at = time.time_ns()
        resume = _bench.timed(_bench.sparkrecover("resume", name, "--root", root), log, env)
        computed = marked_since(os.path.join(work, name, "markers"), killed_at)
        ratio = resume / full
        goal = GOALS.get(fraction)
        allowed = parts - target + 4
        print(
            f"killed at {int(fraction * 100)} % ({target}/{parts} commits journaled): resume computed "
            f"{computed} partitions (at most {allowed}: {_bench.verdict(computed, allowed)}), "
            f"{resume:.2f} s = {ratio:.3f} x the full run"
            + (f" (goal <= {goal}: {_bench.verdict(ratio, goal)})" if goal else ""),
            flush=True,
        )
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    print(f"done {_bench.load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
