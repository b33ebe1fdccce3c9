"""The tests' standalone cluster (tests/cluster.py) leaves no jar copies behind when it stops: each
application's executors copy its jars (the s3a jars ~200 MB) into their worker's work folder, which
over a few benchmark runs once filled this machine's disk. The workers' logs stay."""

from __future__ import annotations

from tests.cluster import Cluster


def test_stopping_drops_the_executors_jar_copies_and_keeps_their_logs(tmp_path):
    cluster = Cluster(tmp_path / "cluster", workers=2)
    copies, logs = [], []
    for index in range(2):
        executor = cluster.folder / f"work-{index}" / "app-20261126190000-0001" / str(index)
        executor.mkdir(parents=True)
        copies.append(executor / "hadoop-aws-3.3.1.jar")
        logs.append(executor / "stderr")
        for path in (copies[-1], logs[-1]):
            path.write_text("x")
    cluster.stop()  # never started: no process to stop, only the folders
    assert not any(path.exists() for path in copies)
    assert all(path.exists() for path in logs)
