"""Shuffles and task-level resume (docs/design.md §9): a join and an aggregation over a map side of
24 partitions of about 1 s each, then one write of 40 partitions of about 1 s each, killed after 70 %
of the write's partitions committed, and killed half-way through the map stage, then resumed.

    .venv/bin/python scripts/bench_shuffle_resume.py [--where local|standalone|s3 ...] [--maps 24]
        [--writes 40] [--seconds 1.0] [--keep-cost] [--no-map-kill] [--pairs 1] [--task-cost-only]
        [--executor-java-options=OPTIONS]

``--where`` takes one place or several, run one after the other; the last lines give the judged
ratio of a task reading kept map outputs (step 4) for each. ``--task-cost-only`` runs only that
judged pair (the warm-up job's full run, its kill at 70 % and resume). ``--executor-java-options``
goes to every run's ``spark.executor.extraJavaOptions``: a profiler's (scripts/jfr_write_tasks.py).

``--where``: ``local`` (default) runs on ``local[2]`` with a local run root (map outputs kept as
hard links); ``standalone`` on a standalone master with two workers of one core on loopback, each
with its own local directories, the run root a local folder both see (``--keep-shuffles copy``);
``s3`` on the same cluster with the run root on S3 (a moto server on loopback, Spark through s3a
with the jars scripts/fetch_s3a_jars.py fetches; ``auto`` copies there).

1. The app (tests/apps/shuffle_write.py, shape ``etl``: each map task and each post-shuffle task
   sleeps once and leaves a marker) under ``sparkrecover submit``, uninterrupted: the full run
   (after an untimed plain run of a tiny version: the first application on a fresh cluster starts
   slower than the next, whichever it is).
2. The same under plain ``spark-submit``: a plain re-submission after a crash, and the clean-run
   overhead of ``submit`` (wall; on ``local`` also CPU of the whole process tree).
3. For each kill point: ``sparkrecover submit``, its driver SIGKILLed there; then ``sparkrecover
   resume`` (started once the cluster has released the killed driver's executors), timed from
   launch to exit, counting the map and write partitions it computed (from the markers).
4. Per task, from Spark's event logs: the median wall and CPU time of a write task that read the
   kept map outputs (the resume killed at 70 %) against one that read a fresh shuffle (the full
   run), and the executors' cost of keeping (``keep_us``, ``copy_us``, ``wait_us`` in the journal).
   The resumed application's executors are new JVMs whose first tasks are these: their first
   write task (class loading, the Python worker's start) is left out on both sides, and tasks are
   compared rank by rank on their executor. Then once more on equally warm executors, the judged
   pair (docs/decisions/0055): a full run and a kill at 70 % of its write and resume, of the job
   with 8 map partitions, both applications running the same small job first (``SHUFFLE_WARM_UP``;
   the resume with ``--no-replay``, or it would answer that job's collect from the journal without
   running it), and the resume then a twin of the map side it skips (``SHUFFLE_TWIN``: the same
   kinds of map, join and aggregation tasks over other ids), so that each side's executors have
   run as many tasks of the same kinds before the write (the counts are printed: 95 against 94).
   What is compared: the CPU (and wall) time of the write tasks that read shuffle bytes, each
   executor's 2nd task on, rank by rank with the other side's, medians: the resume's read kept map
   outputs, the full run's a fresh shuffle. The goal is judged on that, the median over the pairs.
5. With ``--keep-cost`` (``local`` only): clean runs with each ``--keep-shuffles`` (off, link, copy).
6. With ``--pairs N`` (N >= 2): N - 1 more full runs under ``submit``, each followed by its own kill
   at 70 % of the write and resume; the resume goal is then judged on the median resume over the
   median full run (single runs on two cores move by 10-30 %, on both sides of the ratio). The
   judged pair of step 4 runs N times too: the task goal is judged on the median of the N pairs'
   ratios, each pair's printed with the spread and the ratio of the pooled tasks' medians (one pair
   is 5-11 tasks a side of 17-40 ms of CPU: it moves by +-0.3 between runs of the same code).

Goals (docs/design.md §9): killed at 70 % of the write, 0 map partitions and at most 30 % + 4
write partitions computed, at most 0.45x the full run on ``local``, 0.55x on ``standalone``, 0.60x
with the root on S3; killed at 50 % of the map stage, at most 50 % + 2 map partitions; clean-run
overhead at most 1.05x on ``local``, 1.10x where map outputs are copied; a write task reading kept
map outputs at most 1.2x the time and CPU of one reading a fresh shuffle. Exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import _bench
from _shuffle_tasks import medians, rank_matched, tasks_before_write, write_tasks

sys.path.insert(0, _bench.REPO)

APP = os.path.join(_bench.REPO, "tests", "apps", "shuffle_write.py")
RATIO_GOALS = {"local": 0.45, "standalone": 0.55, "s3": 0.60}
OVERHEAD_GOALS = {"local": 1.05, "standalone": 1.10, "s3": 1.10}
TASK_GOAL = 1.2


def write_commits(run_dir: str) -> int:
    """Write partitions the first attempt committed, as the run's own fold reads the journal."""
    from sparkrecover.core.fold.runstate import RunState
    from sparkrecover.journal import read_journal

    state = RunState.from_events(os.path.basename(run_dir), read_journal(run_dir))
    return sum(1 for stage in state.stages.values() for by, _ in stage.committed_tasks.values() if by == 1)


def marked(markers: str, kind: str, since_ns: int = 0) -> int:
    """Tasks of ``kind`` (map, write) that computed their partition after ``since_ns``."""
    if not os.path.isdir(markers):
        return 0
    return sum(1 for name in os.listdir(markers) if name.split("-")[0] == kind and int(name.split("-")[3]) > since_ns)


def keep_times(run_dir: str) -> tuple[int, float, float, float, int]:
    """(map outputs kept, mean ms on the map task's thread, mean ms of the background copy, mean
    ms waited for a copier, bytes kept) of a run."""
    from sparkrecover.journal import read_journal

    kept = [m for e in read_journal(run_dir) if e["type"] == "shuffle.committed" for m in e["maps"]]

    def mean_ms(key: str) -> float:
        values = [int(m.get(key) or 0) for m in kept]
        return sum(values) / len(values) / 1000 if values else 0.0

    size = sum(int(m["data_bytes"]) + int(m["index_bytes"]) for m in kept)
    return len(kept), mean_ms("keep_us"), mean_ms("copy_us"), mean_ms("wait_us"), size


class Where:
    """Where the benchmark runs: the master's options, the run root, what submit adds, the environment."""

    def __init__(self, where: str, work: str):
        self.where, self.work = where, work
        self.options = list(_bench.SPARK_OPTIONS)
        self.root = os.path.join(work, "root")
        self.submit_options: list[str] = []
        self.env = dict(os.environ)
        self.cluster = None
        self.secrets: list[str] = []  # redacted from the journal: given again to each resume
        self.s3 = None
        if where == "local":
            return
        from pathlib import Path

        from tests.cluster import Cluster

        self.cluster = Cluster(Path(work) / "cluster", workers=2)
        self.cluster.start()
        self.env = dict(self.cluster.env)
        self.options += ["--master", self.cluster.url]
        if where == "standalone":
            self.submit_options = ["--keep-shuffles", "copy"]  # a local folder both workers see
            return
        from tests.e2e.support import s3a_jars, s3a_options
        from tests.s3server import MotoS3

        if not s3a_jars():
            sys.exit("no hadoop-aws jars: run .venv/bin/python scripts/fetch_s3a_jars.py")
        self.s3 = MotoS3()
        self.s3.create_bucket()
        os.environ.update(self.s3.env())  # this process reads the journal from S3 too
        self.env.update(self.s3.env())
        self.root = self.s3.unique_prefix() + "/runs"
        self.options += s3a_options(self.s3.endpoint)
        for key, value in self.s3.env().items():
            self.secrets += ["--conf", f"spark.executorEnv.{key}={value}"]
        self.options += self.secrets

    def idle(self) -> None:
        """The killed driver's executors released (a cluster frees them a moment after)."""
        if self.cluster is not None:
            self.cluster.idle(timeout=120)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()  # which also drops the executors' copies of the jars
        if self.s3 is not None:
            self.s3.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--where", choices=sorted(RATIO_GOALS), nargs="+", default=["local"], help="one or more, one after the other"
    )
    parser.add_argument("--maps", type=int, default=24)
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--keep-cost", action="store_true", help="also time clean runs with each --keep-shuffles")
    parser.add_argument("--no-map-kill", action="store_true", help="skip the kill half-way through the map stage")
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="full runs and kills at 70 %% of the write to time (>= 2: the resume goal judged on their medians)",
    )
    parser.add_argument(
        "--task-cost-only",
        action="store_true",
        help="only the judged per-task comparison: the full run and resume after the warm-up job",
    )
    parser.add_argument(
        "--executor-java-options", default="", help="spark.executor.extraJavaOptions of every run (a profiler's)"
    )
    options = parser.parse_args()
    _bench.warm_jar()
    judged = {place: bench(options, place) for place in options.where}
    print("a write task reading kept map outputs against one reading a fresh shuffle, after the same warm-up job:")
    for place, (wall, cpu) in judged.items():
        verdict = _bench.verdict(max(wall, cpu), TASK_GOAL)
        print(f"  {place}: {wall:.2f} x wall, {cpu:.2f} x CPU (goal <= {TASK_GOAL}: {verdict})")
    return 0


def judged_medians(pairs: list[tuple[float, float]], kept: list[float], fresh: list[float]) -> tuple[float, float]:
    """The median (wall, CPU) ratio of the judged pairs, their spread printed beside it, and the
    ratio of the median CPU of every judged task pooled over the pairs (``kept``, ``fresh``)."""
    walls, cpus = [p[0] for p in pairs if p[1]], [p[1] for p in pairs if p[1]]
    if not cpus:
        return 0.0, 0.0
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    pooled = statistics.median(kept) / statistics.median(fresh) if kept and fresh else 0.0
    print(
        f"  over {len(cpus)} judged pairs: median {wall:.2f} x wall (pairs {', '.join(f'{w:.2f}' for w in walls)}), "
        f"{cpu:.2f} x CPU (pairs {', '.join(f'{c:.2f}' for c in cpus)}; spread {min(cpus):.2f}-{max(cpus):.2f}); "
        f"pooled, the median CPU of all {len(kept)} kept against all {len(fresh)} fresh judged tasks: {pooled:.2f} x",
        flush=True,
    )
    return wall, cpu


def bench(options: argparse.Namespace, place: str) -> tuple[float, float]:
    """The benchmark on ``place``: prints its figures, returns the judged task's (wall, CPU) ratios."""
    maps, writes = options.maps, options.writes
    work = tempfile.mkdtemp(prefix="sparkrecover-bench-shuffle-resume-")
    log = os.path.join(work, "runs.log")
    seconds = str(options.seconds)
    where = Where(place, work)
    if options.executor_java_options:
        where.options += ["--conf", f"spark.executor.extraJavaOptions={options.executor_java_options}"]
    env = {**where.env, "SHUFFLE_MAP_SLEEP": seconds, "SHUFFLE_WRITE_SLEEP": seconds}
    ratio_goal, overhead_goal = RATIO_GOALS[place], OVERHEAD_GOALS[place]
    places = {
        "local": "local[2]",
        "standalone": "two workers, root a shared local folder",
        "s3": "two workers, root on S3",
    }
    print(
        f"bench_shuffle_resume: {maps} map partitions, a join and an aggregation, a write of {writes} "
        f"partitions, x {options.seconds:.1f} s each on {places[place]} {_bench.load_note()}; logs in {log}",
        flush=True,
    )
    from sparkrecover.rundir import storage

    def app(name: str, map_partitions: int = maps) -> list[str]:
        events = os.path.join(work, name, "events")
        os.makedirs(events, exist_ok=True)
        return [
            "--conf",
            "spark.eventLog.enabled=true",
            "--conf",
            f"spark.eventLog.dir={events}",
            "--conf",
            "spark.eventLog.compress=false",
            APP,
            os.path.join(work, name, "out"),
            os.path.join(work, name, "markers"),
            "etl",
            str(map_partitions),
            str(writes),
        ]

    def submit(name: str, *extra: str, map_partitions: int = maps) -> list[str]:
        return _bench.sparkrecover(
            "submit", "--root", where.root, "--run-id", name, *where.submit_options, *extra, "--", *where.options
        ) + app(name, map_partitions)

    try:
        # Untimed: the first application on a fresh cluster (and the first JVM after a while) starts
        # slower than the next ones, whichever runs it; the full run must not carry that alone.
        warm_app = app("warm-up", 2)
        warm_app[-1] = "2"
        _bench.timed(
            [_bench.spark_submit(), *where.options, *warm_app],
            log,
            {**_bench.plain_env(), **env, "SHUFFLE_MAP_SLEEP": "0", "SHUFFLE_WRITE_SLEEP": "0"},
        )
        where.idle()

        def kill_and_resume(
            name: str,
            label: str,
            until: Callable[[str, str], bool],
            allowed: tuple[int, int],
            goal: float | None,
            run_env: dict[str, str] = env,
            map_partitions: int = maps,
            whole: float = 0.0,
            resume_options: tuple[str, ...] = (),
            resume_env: dict[str, str] | None = None,
        ) -> float:
            from tests.e2e.support import kill_tree

            run_dir, markers = storage.join(where.root, name), os.path.join(work, name, "markers")
            with open(log, "ab") as handle:
                child = subprocess.Popen(
                    submit(name, "--flush-interval", "0.2", map_partitions=map_partitions),
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=run_env,
                )
                while not until(run_dir, markers):
                    if child.poll() is not None:
                        sys.exit(f"the run ended (exit {child.returncode}) before the kill point; see {log}")
                    time.sleep(0.05)
                kill_tree(child.pid)
                child.wait()
            killed_at = time.time_ns()
            where.idle()
            resume = _bench.timed(
                _bench.sparkrecover(
                    "resume",
                    name,
                    "--root",
                    where.root,
                    *resume_options,
                    *(("--", *where.secrets) if where.secrets else ()),
                ),
                log,
                resume_env or run_env,
            )
            computed_maps, computed_writes = marked(markers, "map", killed_at), marked(markers, "write", killed_at)
            ratio = resume / whole
            print(
                f"killed {label}: resume computed {computed_maps} map partitions (at most {allowed[0]}: "
                f"{_bench.verdict(computed_maps, allowed[0])}) and {computed_writes} write partitions (at most "
                f"{allowed[1]}: {_bench.verdict(computed_writes, allowed[1])}), {resume:.2f} s = {ratio:.3f} x the "
                f"full run ({whole:.2f} s)" + (f" (goal <= {goal}: {_bench.verdict(ratio, goal)})" if goal else ""),
                flush=True,
            )
            return resume

        judged_cpu: tuple[list[float], list[float]] = ([], [])  # every judged task's CPU, kept and fresh

        def task_cost(kept_run: str, fresh_run: str, label: str, judged: bool) -> tuple[float, float]:
            kept_tasks = write_tasks(os.path.join(work, kept_run, "events"))
            fresh_tasks = write_tasks(os.path.join(work, fresh_run, "events"))
            if judged:
                judged_cpu[0].extend(t[1] for t in rank_matched(kept_tasks, fresh_tasks))
                judged_cpu[1].extend(t[1] for t in rank_matched(fresh_tasks, kept_tasks))
            kept, fresh = medians(rank_matched(kept_tasks, fresh_tasks)), medians(rank_matched(fresh_tasks, kept_tasks))
            every_kept, every_fresh = medians(kept_tasks), medians(fresh_tasks)
            if not (fresh[0] and kept[0] and fresh[1]):
                return 0.0, 0.0
            wall, cpu = kept[0] / fresh[0], kept[1] / fresh[1]
            verdict = (
                f" (goal <= {TASK_GOAL}: {_bench.verdict(max(wall, cpu), TASK_GOAL)})" if judged else " (not judged)"
            )
            print(
                f"  {label}: a write task reading kept map outputs: median {kept[0]:.3f} s wall, "
                f"{kept[1] * 1000:.1f} ms CPU, {kept[2] * 1000:.0f} ms fetch wait; reading a fresh shuffle: "
                f"{fresh[0]:.3f} s, {fresh[1] * 1000:.1f} ms, {fresh[2] * 1000:.0f} ms (write tasks 2 to "
                f"{max(t[3] for t in rank_matched(kept_tasks, fresh_tasks)) + 1} of each executor); {wall:.2f} x wall, "
                f"{cpu:.2f} x CPU{verdict}; every write task: {every_kept[0]:.3f} s, {every_kept[1] * 1000:.1f} ms "
                f"against {every_fresh[0]:.3f} s, {every_fresh[1] * 1000:.1f} ms; tasks run before the write "
                f"{tasks_before_write(os.path.join(work, kept_run, 'events'))} against "
                f"{tasks_before_write(os.path.join(work, fresh_run, 'events'))}",
                flush=True,
            )
            return wall, cpu

        target = round(writes * 0.7)
        at_70 = f"at 70 % of the write ({target}/{writes} commits journaled)"
        full = 0.0
        if not options.task_cost_only:
            full, full_cpu = _bench.timed_cpu(submit("full"), log, env)
            counted = (
                marked(os.path.join(work, "full", "markers"), "map"),
                marked(os.path.join(work, "full", "markers"), "write"),
            )
            print(
                f"  full run under sparkrecover submit: {full:.2f} s ({counted[0]} map, {counted[1]} write "
                "partitions computed)"
            )
            where.idle()
            plain, plain_cpu = _bench.timed_cpu(
                [_bench.spark_submit(), *where.options, *app("plain")], log, {**_bench.plain_env(), **env}
            )
            plain_counted = (
                marked(os.path.join(work, "plain", "markers"), "map"),
                marked(os.path.join(work, "plain", "markers"), "write"),
            )
            overhead = full / plain
            cpu_note = (
                f", {full_cpu / plain_cpu:.3f} x CPU"
                if place == "local"
                else " (executors' CPU is not this process tree's)"
            )
            print(
                f"  plain spark-submit: {plain:.2f} s ({plain_counted[0]} map, {plain_counted[1]} write partitions "
                f"computed; the same under submit: {'met' if counted == plain_counted else 'MISSED'})\n"
                f"  clean-run overhead of submit: {overhead:.3f} x wall (goal <= {overhead_goal}: "
                f"{_bench.verdict(overhead, overhead_goal)}){cpu_note}\n"
                f"  plain re-submission after a crash (whole job): {plain / full:.3f} x the full run",
                flush=True,
            )
            count, keep_ms, copy_ms, wait_ms, size = keep_times(storage.join(where.root, "full"))
            print(
                f"  keeping in the full run: {count} map outputs ({size:,} bytes), per map output {keep_ms:.2f} ms "
                f"on the map task's thread, {copy_ms:.2f} ms of background copy, {wait_ms:.2f} ms waiting for a copier",
                flush=True,
            )

            fulls, resumes = [full], []
            for pair in range(1, options.pairs + 1):
                if pair > 1:
                    # Single runs on two cores move by 10-30 %, the full run as much as the resume:
                    # more pairs, each full run and its resume back to back, the goal on the medians.
                    where.idle()
                    fulls.append(_bench.timed(submit(f"full-{pair}"), log, env))
                    where.idle()
                resumes.append(
                    kill_and_resume(
                        "write70" if pair == 1 else f"write70-{pair}",
                        at_70 if pair == 1 else f"{at_70}, pair {pair}",
                        lambda run_dir, _markers: write_commits(run_dir) >= target,
                        (0, writes - target + 4),
                        ratio_goal if options.pairs == 1 else None,
                        whole=fulls[-1],
                    )
                )
            if options.pairs > 1:
                resumed, whole = statistics.median(resumes), statistics.median(fulls)
                print(
                    f"over {options.pairs} pairs: median resume {resumed:.2f} s / median full run {whole:.2f} s = "
                    f"{resumed / whole:.3f} x (goal <= {ratio_goal}: {_bench.verdict(resumed / whole, ratio_goal)}); "
                    f"full runs {', '.join(f'{t:.1f}' for t in fulls)} s, "
                    f"resumes {', '.join(f'{t:.1f}' for t in resumes)} s",
                    flush=True,
                )

            task_cost("write70", "full", "new JVMs", judged=False)
        warm_env, warm_maps = {**env, "SHUFFLE_WARM_UP": "1"}, 8
        judged_pairs = []
        for pair in range(1, options.pairs + 1):
            suffix = "" if pair == 1 else f"-{pair}"
            where.idle()
            warm_full = _bench.timed(submit(f"warm-full{suffix}", map_partitions=warm_maps), log, warm_env)
            where.idle()
            kill_and_resume(
                f"warm70{suffix}",
                f"at 70 % of the write after a warm-up job ({warm_maps} map partitions), pair {pair}",
                lambda run_dir, _markers: write_commits(run_dir) >= target,
                (0, writes - target + 4),
                None,
                warm_env,
                warm_maps,
                warm_full,
                # The warm-up job is a collect, which a resume would replay from the journal without
                # running it: its executors would then start the write cold (docs/decisions/0039).
                ("--no-replay",),
                # The resume skips the map side the full run computed before its write: a twin of
                # it, over other ids, gives the resumed executors the same tasks (decision 0055).
                {**warm_env, "SHUFFLE_TWIN": "1"},
            )
            judged_pairs.append(
                task_cost(f"warm70{suffix}", f"warm-full{suffix}", f"pair {pair}, equally warm", judged=True)
            )
        judged_ratios = judged_medians(judged_pairs, *judged_cpu)
        half = maps // 2
        if not (options.no_map_kill or options.task_cost_only):
            kill_and_resume(
                "map50",
                f"at 50 % of the map stage ({half}/{maps} map partitions started)",
                lambda _run_dir, markers: marked(markers, "map") >= half,
                (maps - half + 2, writes),
                None,
                whole=full,
            )
        if options.keep_cost and place == "local" and not options.task_cost_only:
            for mode in ("off", "link", "copy"):
                name = f"keep-{mode}"
                took = _bench.timed(submit(name, "--keep-shuffles", mode), log, env)
                count, keep_ms, copy_ms, wait_ms, size = keep_times(storage.join(where.root, name))
                print(
                    f"  clean run with --keep-shuffles {mode}: {took:.2f} s = {took / full:.3f} x the full run; "
                    f"{count} map outputs kept ({size:,} bytes), {keep_ms:.2f} ms each on the map task's thread, "
                    f"{copy_ms:.2f} ms of background copy",
                    flush=True,
                )
    finally:
        where.close()
    print(f"done {_bench.load_note()}")
    return judged_ratios


if __name__ == "__main__":
    sys.exit(main())
