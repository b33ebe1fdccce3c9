"""Task-level resume where clusters keep their data (real spark-submit, real SIGKILL): a narrow write
to S3 through s3a (moto's server on loopback, the hadoop-aws jars scripts/fetch_s3a_jars.py fetches)
and to a Hadoop filesystem that is not ``file:`` but renames atomically, as HDFS does (Hadoop's own
``viewfs://`` over a local folder; the command line reads it through tests/hdfslike)."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import orjson
import pytest

from tests.e2e.support import (
    Hold,
    commits_reach,
    computed_since,
    needs_s3a,
    one_write_command,
    run_and_kill,
    s3a_options,
    task_commits,
)
from tests.helpers import REPO, events_of, run_cli, sparkrecover_command

pytestmark = pytest.mark.e2e
PARTS, KILL_AT = 16, 11  # killed once 11 of 16 partitions (70 %) committed, the next ones held
ROWS, PAYLOAD, PAYLOAD_FROM = 200, 56 << 10, 9
# Partitions 9-15 write 100 rows of 56 KiB (with 5 MiB parts, a file in flight is then an open
# multipart upload); partitions from KILL_AT on wait there for the test's signal (Hold), so the kill
# lands while their uploads are open, and before any of them commits.
APP_ENV = {
    "ONE_WRITE_ROWS": str(ROWS),
    "ONE_WRITE_SLEEP_ROW": "100",
    "ONE_WRITE_SLEEP": "0",
    "ONE_WRITE_PAYLOAD": f"{PAYLOAD}:{PAYLOAD_FROM}",
}
LARGE_FILES = [
    "--conf",
    "spark.hadoop.fs.s3a.multipart.size=5M",
    "--conf",
    "spark.hadoop.parquet.block.size=1048576",
]


def expected_rows() -> list[tuple[int, int, str]]:
    """(id, tripled, sha256 of the payload) of every row one uninterrupted write leaves."""

    def payload(value: int) -> bytes:  # tests/apps/one_write.py: payload
        if value // ROWS < PAYLOAD_FROM or value % ROWS >= 100:
            return b""
        return hashlib.shake_256(str(value).encode()).digest(PAYLOAD)

    return [(i, i * 3, hashlib.sha256(payload(i)).hexdigest()) for i in range(PARTS * ROWS)]


def rows_of(spark, folder: str, fmt: str = "parquet") -> list[tuple[int, int, str]]:
    from pyspark.sql import functions as F

    frame = spark.read.format(fmt).load(folder)
    if fmt == "json":  # JSON carries binary as base64 text
        frame = frame.withColumn("payload", F.unbase64("payload"))
    digests = frame.select("id", "tripled", F.sha2(F.coalesce("payload", F.lit(b"")), 256).alias("digest"))
    return sorted((r.id, r.tripled, r.digest) for r in digests.collect())


class Bucket:
    """The moto bucket, seen with boto3 (what an operator's `aws s3api` would show)."""

    def __init__(self, s3) -> None:
        import boto3

        self.client = boto3.client("s3", endpoint_url=s3.endpoint)
        self.name, _, self.prefix = s3.prefix[len("s3://") :].partition("/")

    def keys(self) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=self.prefix + "/")
        return sorted(o["Key"][len(self.prefix) + 1 :] for page in pages for o in page.get("Contents", []))

    def uploads(self) -> list[str]:
        """Keys of the multipart uploads open below the prefix."""
        found = self.client.list_multipart_uploads(Bucket=self.name, Prefix=self.prefix + "/").get("Uploads", [])
        return sorted(u["Key"][len(self.prefix) + 1 :] for u in found)

    def read(self, key: str) -> dict:
        """A JSON object of the bucket (``key`` below the prefix)."""
        return orjson.loads(self.client.get_object(Bucket=self.name, Key=f"{self.prefix}/{key}")["Body"].read())

    def abort(self, full_key: str, upload_id: str) -> None:
        """Abort one multipart upload (``full_key`` as S3 names it, prefix included)."""
        self.client.abort_multipart_upload(Bucket=self.name, Key=full_key, UploadId=upload_id)

    def download(self, folder: str, into: str) -> str:
        for key in self.keys():
            if key.startswith(folder + "/"):
                local = os.path.join(into, key)
                os.makedirs(os.path.dirname(local), exist_ok=True)
                self.client.download_file(self.name, f"{self.prefix}/{key}", local)
        return os.path.join(into, folder)


def submit_until_an_upload_is_open(root, out, markers, bucket, spark_options, variant, env, stop=None) -> int:
    """Submit the app (its tasks held from KILL_AT on: ``env`` holds them), SIGKILL it once KILL_AT
    partitions committed and a held task's multipart upload is open (a large file in flight);
    returns the time of the kill (ns)."""
    run_dir = os.path.join(root, "night")

    def ready() -> bool:
        held = [key for key in bucket.uploads() if int(key.rsplit("part-", 1)[1][:5]) >= KILL_AT]
        return task_commits(run_dir, 1) >= KILL_AT and bool(held)

    command = one_write_command(root, out, markers, variant, spark_options=spark_options)
    return run_and_kill(command, ready, "a held task's upload", env=env, timeout=600, stop=stop)


def shadowed_s3fs(tmp_path) -> str:
    """A folder that, first on PYTHONPATH, makes ``import s3fs`` fail as it does without the
    package's [s3] extra."""
    folder = tmp_path / "no-s3fs" / "s3fs"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise ImportError('s3fs is not installed (shadowed by the test)')\n")
    return str(folder.parent)


@needs_s3a
def test_a_narrow_write_to_s3a_killed_at_70_percent_keeps_its_committed_partitions(spark, tmp_path, s3):
    """The driver has no s3fs (the write is recorded through Hadoop's client all the same); the
    resume computes only the partitions that had not committed, aborts the upload a killed task
    left, and the bucket ends as one uninterrupted write leaves it."""
    root, markers = str(tmp_path / "root"), str(tmp_path / "markers")
    bucket = Bucket(s3)
    out = "s3a" + s3.prefix[2:] + "/out"
    spark_options = (*s3a_options(s3.endpoint), *LARGE_FILES)
    hold = Hold(tmp_path)
    env = hold.env(KILL_AT, **APP_ENV)
    first_env = {**env, "PYTHONPATH": os.pathsep.join([shadowed_s3fs(tmp_path), env.get("PYTHONPATH", "")])}
    killed_at = submit_until_an_upload_is_open(root, out, markers, bucket, spark_options, "overwrite", first_env)
    left = bucket.uploads()
    assert left and all(key.startswith("out/_temporary/0/_temporary/attempt_") for key in left), left

    dry = run_cli("resume", "night", "--root", root, "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    (stage,) = orjson.loads(dry.stdout)["stages"]
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert kept == KILL_AT and stage["partitions"]["total"] == PARTS

    started = time.monotonic()
    hold.release()
    resumed = run_cli("resume", "night", "--root", root, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    print(f"resume: {time.monotonic() - started:.1f} s, {kept} of {PARTS} partitions kept")
    assert len(computed_since(markers, killed_at)) == PARTS - kept  # kept ones were not computed

    assert bucket.uploads() == []  # the killed task's upload was aborted, nothing else left open
    keys = bucket.keys()
    data = [key for key in keys if key.startswith("out/part-")]
    assert sorted({key[len("out/") : len("out/part-00000")] for key in data}) == [f"part-{p:05d}" for p in range(PARTS)]
    assert keys == sorted([*data, "out/_SUCCESS"])  # no _temporary, no set-aside folder, nothing else
    assert rows_of(spark, bucket.download("out", str(tmp_path / "copy"))) == expected_rows()

    events = events_of(os.path.join(root, "night"))
    writes = [e for e in events if e["type"] == "write.started"]
    assert [(e["attempt"], len(e["kept"]), e["reusable"]) for e in writes] == [(1, 0, True), (2, kept, True)]
    assert writes[1]["kept_dir"] == out + "/_temporary/0"  # kept in place: never copied aside and back
    (committed,) = [e for e in events if e["type"] == "stage.committed"]
    assert committed["manifest"][0]["file_count"] == PARTS and committed["manifest"][0]["success"] is True


def test_a_write_to_an_hdfs_like_store_keeps_its_committed_partitions(spark, tmp_path):
    """A store that is not ``file:`` and renames atomically (viewfs:// over a local folder): the
    driver sets the committed task folders aside and brings them back through Hadoop's client, the
    command line reads the evidence through fsspec; nothing is copied."""
    root, markers, disk = str(tmp_path / "root"), str(tmp_path / "markers"), tmp_path / "hdfs"
    disk.mkdir()
    out = "viewfs://cluster/data/out"
    hold = Hold(tmp_path)
    env = hold.env(
        KILL_AT,
        PYTHONPATH=os.pathsep.join([os.path.join(REPO, "tests", "hdfslike"), os.environ.get("PYTHONPATH", "")]),
        SPARKRECOVER_TEST_VIEWFS=f"cluster={disk}",
        ONE_WRITE_SLEEP="0",
    )
    mount = ["--conf", f"spark.hadoop.fs.viewfs.mounttable.cluster.linkFallback=file://{disk}"]
    command = one_write_command(root, out, markers, spark_options=mount)
    run_dir = os.path.join(root, "night")
    killed_at = run_and_kill(command, commits_reach(run_dir, 1, KILL_AT), "the commits", env=env, timeout=600)
    attempt = disk / "data" / "out" / "_temporary" / "0"
    inodes = {os.stat(f).st_ino for f in attempt.glob("task_*/part-*")}

    dry = run_cli("resume", "night", "--root", root, "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    (stage,) = orjson.loads(dry.stdout)["stages"]
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert kept == KILL_AT

    hold.release()
    resumed = run_cli("resume", "night", "--root", root, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(computed_since(markers, killed_at)) == PARTS - kept
    (resumed_write,) = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"][1:]
    assert resumed_write["kept_dir"] == "viewfs://cluster/data/.sparkrecover-kept-out"  # renamed aside and back
    assert sorted((r.id, r.tripled) for r in spark.read.parquet(str(disk / "data" / "out")).collect()) == [
        (i, i * 3) for i in range(PARTS * 100)
    ]
    names = sorted(os.listdir(disk / "data" / "out"))
    data = [name for name in names if name.startswith("part-")]
    assert sorted({name[:10] for name in data}) == [f"part-{p:05d}" for p in range(PARTS)]
    assert "_SUCCESS" in names and "_temporary" not in names
    assert sorted(os.listdir(disk / "data")) == ["out"]  # the set-aside folder is gone
    # The kept files were renamed, never copied: the same inodes, now in the target.
    assert len({n for n in data if os.stat(disk / "data" / "out" / n).st_ino in inodes}) == kept


MAGIC = {"spark.hadoop.fs.s3a.committer.name": "magic", "spark.hadoop.fs.s3a.committer.magic.enabled": "true"}
# Spark's documented binding of the S3A committers (spark-hadoop-cloud's protocol, which
# sparkrecover stands in for; without it the class would not even load here), for Parquet too.
PATH_OUTPUT = {"spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"}


@needs_s3a
@pytest.mark.parametrize(
    ("variant", "settings"),
    [("json", MAGIC), ("overwrite", {**MAGIC, **PATH_OUTPUT})],
    ids=["json-factory", "parquet-path-output-protocol"],
)
def test_a_write_through_the_magic_committer_keeps_its_committed_pendingsets(spark, tmp_path, s3, variant, settings):
    """hadoop-aws's magic committer, bound through Hadoop's factory (JSON) or through the protocol
    Spark's docs name (Parquet): a committed task is a pendingset below the target and uploads left
    open at the final keys. The resume adopts the dead job's pendingsets and computes only the other
    partitions; the killed task's upload is aborted, and the bucket ends as one uninterrupted write
    leaves it (nothing under __magic, no upload open)."""
    root, markers = str(tmp_path / "root"), str(tmp_path / "markers")
    bucket = Bucket(s3)
    out = "s3a" + s3.prefix[2:] + "/out"
    spark_options = [*s3a_options(s3.endpoint), *LARGE_FILES]
    for key, value in settings.items():
        spark_options += ["--conf", f"{key}={value}"]
    fmt = "json" if variant == "json" else "parquet"
    hold = Hold(tmp_path)
    env = hold.env(KILL_AT, **APP_ENV)
    # The Parquet run is stopped as clusters stop drivers, by SIGTERM (to sparkrecover submit, which
    # hands it to the driver): its job abort must leave the pendingsets and their uploads, as a
    # SIGKILL does.
    stopped: list[int] = []

    def sigterm(process) -> None:
        process.send_signal(signal.SIGTERM)
        stopped.append(process.wait(timeout=120))

    stop = sigterm if variant != "json" else None
    killed_at = submit_until_an_upload_is_open(root, out, markers, bucket, spark_options, variant, env, stop)
    assert stopped == ([143] if stop else [])
    keys = bucket.keys()
    pendingsets = [key for key in keys if key.endswith(".pendingset")]
    assert len(pendingsets) == KILL_AT and all(key.startswith("out/__magic/job-") for key in pendingsets), keys
    assert not [key for key in keys if key.startswith("out/part-")]  # nothing visible before the job commit
    # The committed tasks' uploads, and the held tasks' (a stopped driver's tasks abort theirs).
    assert len(bucket.uploads()) >= len(pendingsets) + (stop is None)
    expired = None
    if variant == "json":
        # A bucket's lifecycle rule aborted one committed task's upload: its pendingset cannot be
        # committed any more, so that partition is computed again (and the plan says so).
        last = bucket.read(max(key for key in pendingsets if "_m_0000" in key))
        expired = int(last["commits"][0]["destinationKey"].rsplit("part-", 1)[1][:5])
        bucket.abort(last["commits"][0]["destinationKey"], last["commits"][0]["uploadId"])

    dry = run_cli("resume", "night", "--root", root, "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    (stage,) = orjson.loads(dry.stdout)["stages"]
    assert stage["decision"] == "continue", stage
    kept = stage["partitions"]["kept"]
    assert kept == KILL_AT - (expired is not None) and stage["partitions"]["total"] == PARTS
    first_kill, plans = killed_at, [kept]
    if variant == "json":
        # A resume killed during its write, once it had adopted the pendingsets into its job's folder
        # (under the dead job's UUID, beside its own tasks'), resumes again exactly: killed once it
        # committed the expired partition, the others held.
        resume = sparkrecover_command("resume", "night", "--root", root)
        run_dir = os.path.join(root, "night")
        killed_at = run_and_kill(resume, commits_reach(run_dir, 2, 1), "a commit", env=env, timeout=600)
        (again,) = orjson.loads(run_cli("resume", "night", "--root", root, "--dry-run", "--json", env=env).stdout)[
            "stages"
        ]
        assert again["decision"] == "continue" and again["partitions"]["kept"] == kept + 1, again
        kept = again["partitions"]["kept"]
        plans.append(kept)

    hold.release()
    resumed = run_cli("resume", "night", "--root", root, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # Kept ones were not computed, as planned (else: what each attempt's write kept, and why).
    writes = [e for e in events_of(os.path.join(root, "night")) if e["type"] == "write.started"]
    why = [(e["attempt"], len(e["kept"]), e.get("reason")) for e in writes]
    assert len(computed_since(markers, killed_at)) == PARTS - kept, (why, resumed.stderr[-3000:])
    assert expired is None or expired in computed_since(markers, first_kill)
    assert bucket.uploads() == []
    keys = bucket.keys()
    data = [key for key in keys if key.startswith("out/part-")]
    assert sorted({key[len("out/") : len("out/part-00000")] for key in data}) == [f"part-{p:05d}" for p in range(PARTS)]
    assert keys == sorted([*data, "out/_SUCCESS"])  # no __magic, no set-aside folder, nothing else
    assert rows_of(spark, bucket.download("out", str(tmp_path / "copy")), fmt) == expected_rows()

    events = events_of(os.path.join(root, "night"))
    writes = [e for e in events if e["type"] == "write.started"]
    assert [(e["attempt"], len(e["kept"]), e["reusable"]) for e in writes] == [
        (attempt, kept, True) for attempt, kept in enumerate([0, *plans], start=1)
    ]
    assert writes[1]["kept_dir"].startswith(out + "/__magic/job-")  # kept in place: never copied
