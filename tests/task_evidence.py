"""Committed-task evidence laid out as the output committers leave it, on a local folder (no Spark):
FileOutputCommitter's task folders, the S3A magic committer's pendingsets, the manifest committer's
task manifests. Shared by the planner's tests and the property test of what a resumed write keeps."""

from __future__ import annotations

import json
import os
import uuid

UUID = str(uuid.UUID(int=7))  # the write of the task folders
WRITE = str(uuid.uuid4())  # the write of the pendingsets and manifests


def task_folder(
    out: str,
    partition: int,
    write_uuid: str = UUID,
    job: str = "202611230301",
    rows: bool = True,
    place: str | None = None,
) -> str:
    """A committed task folder with one data file (and its checksum), as commitTask leaves it."""
    folder = os.path.join(place or os.path.join(out, "_temporary", "0"), f"task_{job}_0001_m_{partition:06d}")
    os.makedirs(folder)
    if rows:
        name = f"part-{partition:05d}-{write_uuid}-c000.snappy.parquet"
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(b"PAR1" + b"x" * 10 + b"PAR1")
        open(os.path.join(folder, f".{name}.crc"), "w").close()
    return folder


def pendingset(
    out: str, partition: int, *, place: str | None = None, job: str = "job-uuid", files=None, write_uuid: str = WRITE
) -> str:
    """A committed task's pendingset as hadoop-aws's magic committer writes it (JSON: the job's UUID
    and, per file, the upload left open at its final key), below ``out`` or in ``place``."""
    folder = place or os.path.join(out, "__magic", f"job-{job}")
    os.makedirs(folder, exist_ok=True)
    key = out.strip("/")  # a local path stands for the bucket key here
    names = files if files is not None else [f"part-{partition:05d}-{write_uuid}.c000.json"]
    commits = [
        {"destinationKey": f"{key}/{name}", "uploadId": f"upload-{partition}-{i}", "length": 10, "jobId": job}
        for i, name in enumerate(names)
    ]
    path = os.path.join(folder, f"task_202611270000_0001_m_{partition:06d}.pendingset")
    with open(path, "w") as handle:
        handle.write(json.dumps({"version": 3, "jobId": job, "commits": commits}))
    return path


def manifest(
    out: str,
    partition: int,
    *,
    job: str = "job-uuid",
    sizes=(7,),
    write: bool = True,
    names=None,
    write_uuid: str = WRITE,
) -> str:
    """A committed task's manifest as Hadoop's manifest committer writes it, with the task's files
    in the job's tasks/ folder (``write``): each entry names a file there and where the job commit
    renames it, by absolute URI."""
    attempt = os.path.join(out, "_temporary", job, "00")
    task_dir = os.path.join(attempt, "tasks", f"attempt_202611270000_0001_m_{partition:06d}_0")
    os.makedirs(task_dir, exist_ok=True)
    os.makedirs(os.path.join(attempt, "manifests"), exist_ok=True)
    files = []
    for i, size in enumerate(sizes):
        name = (names or [f"part-{partition:05d}-{write_uuid}-{i}.c000.parquet" for _ in sizes])[i]
        if write:
            with open(os.path.join(task_dir, name), "wb") as handle:
                handle.write(b"x" * size)
        files.append({"s": f"file://{task_dir}/{name}", "d": f"file:{out}/{name}", "z": size})
    path = os.path.join(attempt, "manifests", f"task_202611270000_0001_m_{partition:06d}-manifest.json")
    with open(path, "w") as handle:
        handle.write(json.dumps({"type": "TaskManifest", "version": 1, "jobId": job, "files": files}))
    return path
