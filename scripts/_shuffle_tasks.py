"""Write tasks of a shuffle benchmark's applications, from Spark's event logs: what
bench_shuffle_resume.py compares between a write reading kept map outputs and one reading a fresh
shuffle."""

from __future__ import annotations

import json
import os
import statistics


def last_app_logs(events: str) -> list[str]:
    """The event log files of the last application that logged events in ``events``."""
    apps = sorted(os.listdir(events)) if os.path.isdir(events) else []
    if not apps:
        return []
    last = os.path.join(events, apps[-1])
    if not os.path.isdir(last):
        return [last]
    return [os.path.join(last, name) for name in sorted(os.listdir(last)) if name.startswith("events_")]


def tasks_before_write(events: str) -> int:
    """Tasks the last application's executors ran before its parquet write's stage: how warm its
    JVMs were when the write began."""
    ran = 0
    for path in last_app_logs(events):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if '"SparkListenerStageCompleted"' not in line:
                    continue
                info = json.loads(line)["Stage Info"]
                if str(info.get("Stage Name", "")).startswith("parquet at "):
                    return ran
                ran += int(info.get("Number of Tasks") or 0)
    return ran


def write_tasks(events: str) -> list[tuple[float, float, float, int]]:
    """(wall s, CPU s, fetch wait s, rank) of each successful task of the write stage (of the result
    stages named after the parquet write, the one with the most tasks that read shuffle bytes: a
    warm-up job's collect reads a shuffle too) of the last application that logged events
    there (the resume, after the killed attempt), from Spark's event log: a file, or on Spark 4 a
    folder of rolled files (``eventlog_v2_<app>/events_<n>_<app>``). The rank is the task's place
    among those tasks on its executor, by launch time (0: the executor's first)."""
    files = last_app_logs(events)
    stages: dict[int, list[tuple[float, float, float, str, int]]] = {}
    writes: set[int] = set()
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                event = json.loads(line)
                if event.get("Event") == "SparkListenerStageSubmitted":
                    if str(event["Stage Info"].get("Stage Name", "")).startswith("parquet at "):
                        writes.add(event["Stage Info"]["Stage ID"])
                if event.get("Event") != "SparkListenerTaskEnd" or event.get("Task Type") != "ResultTask":
                    continue
                if (event.get("Task End Reason") or {}).get("Reason") != "Success":
                    continue
                metrics = event.get("Task Metrics") or {}
                read = metrics.get("Shuffle Read Metrics") or {}
                if int(read.get("Remote Bytes Read") or 0) + int(read.get("Local Bytes Read") or 0) <= 0:
                    continue
                info = event.get("Task Info") or {}
                stages.setdefault(event["Stage ID"], []).append(
                    (
                        metrics["Executor Run Time"] / 1000,
                        metrics["Executor CPU Time"] / 1e9,
                        int(read.get("Fetch Wait Time") or 0) / 1000,
                        str(info.get("Executor ID")),
                        int(info.get("Launch Time") or 0),
                    )
                )
    stages = {stage: tasks for stage, tasks in stages.items() if stage in writes} or stages
    if not stages:
        return []
    ranked: list[tuple[float, float, float, int]] = []
    tasks = max(stages.values(), key=len)
    for executor in {task[3] for task in tasks}:
        mine = sorted((task for task in tasks if task[3] == executor), key=lambda task: task[4])
        ranked += [(task[0], task[1], task[2], rank) for rank, task in enumerate(mine)]
    return ranked


def rank_matched(tasks: list[tuple[float, float, float, int]], other: list[tuple[float, float, float, int]]):
    """The tasks whose rank on their executor ``other`` has too, leaving out each executor's first."""
    ranks = {task[3] for task in other} - {0}
    return [task for task in tasks if task[3] in ranks]


def medians(tasks: list[tuple[float, float, float, int]]) -> tuple[float, float, float]:
    """Median wall, CPU and fetch wait of the tasks (zeros for none)."""
    if not tasks:
        return 0.0, 0.0, 0.0
    return (
        statistics.median(t[0] for t in tasks),
        statistics.median(t[1] for t in tasks),
        statistics.median(t[2] for t in tasks),
    )
