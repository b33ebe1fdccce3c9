"""Task-level resume of one write (docs/design.md §4a): KeptPartitionsRDD, ResumingCommitProtocol, the
listener's task.committed lines and driver/tasks/partitions.py, on real Spark."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import textwrap
import threading
import time

import orjson
import pytest

from sparkrecover.driver.tasks import partitions
from sparkrecover.jvm import COMMIT_PROTOCOL_CONF, KEPT_DIR_CONF, KEPT_RDD_CLASS, LISTENER_CLASS, find_class
from sparkrecover.launch.launcher import find_spark_submit

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def counting_frame(spark, rows=800, slices=8):
    """spark.range through a Python UDF that counts the rows it sees in an accumulator."""
    from pyspark.sql import functions as F

    seen = spark.sparkContext.accumulator(0)

    @F.udf("long")
    def touch(value):
        seen.add(1)
        return value * 2

    return spark.range(0, rows, 1, slices).withColumn("y", touch("id")), seen


def by_partition(frame):
    from pyspark.sql import functions as F

    rows = frame.withColumn("p", F.spark_partition_id()).collect()
    out: dict[int, set] = {}
    for row in rows:
        out.setdefault(row.p, set()).add((row.id, row.y))
    return out


def test_kept_partitions_are_empty_and_never_computed(spark, jvm):
    frame, seen = counting_frame(spark)
    wrapped = partitions.without_partitions(frame, {0, 3, 5})
    assert wrapped.rdd.getNumPartitions() == 8
    got = by_partition(wrapped)
    assert seen.value == 500  # 5 of 8 partitions of 100 rows went through the UDF
    expected = by_partition(frame)
    assert set(got) == {1, 2, 4, 6, 7}
    assert all(got[p] == expected[p] for p in got)


def test_nothing_kept_still_goes_through_the_wrapper(spark, jvm):
    frame, seen = counting_frame(spark)
    wrapped = partitions.without_partitions(frame, [])
    plan = wrapped._jdf.queryExecution().executedPlan().toString()
    assert "ExistingRDD" in plan
    assert by_partition(wrapped) == by_partition(frame)
    assert seen.value == 1600  # every row, once for each of the two frames collected
    rdd = wrapped._jdf.queryExecution().toRdd()
    assert rdd.getNumPartitions() == 8
    with pytest.raises(Exception, match="does not exist"):
        partitions.without_partitions(frame, [8])


def test_a_resumed_write_places_its_computed_partitions_before_its_kept_ones(spark, jvm):
    """Each computed partition prefers the live executors' hosts and each kept one none (not even its
    parent's), so Spark's scheduler offers an executor a kept task only when no computed one can go
    there: on a new application's executors the first task (which pays the JVM's warm-up) is one
    that computes. With nothing kept the wrapper has no preference of its own (the parent's stay)."""
    frame, _ = counting_frame(spark)
    context = spark.sparkContext._jsc.sc()
    live = {info.host() for info in context.statusTracker().getExecutorInfos()}

    def preferred(wrapped, partition):
        found = context.getPreferredLocs(wrapped._jdf.queryExecution().toRdd(), partition).mkString("\n")
        return set(found.split("\n")) - {""}

    resumed = partitions.without_partitions(frame, {0, 3, 5})
    assert live
    assert [preferred(resumed, p) for p in range(8)] == [set() if p in (0, 3, 5) else live for p in range(8)]
    first = partitions.without_partitions(frame, [])
    assert all(preferred(first, p) == preferred(frame, p) for p in range(8))
    assert by_partition(resumed) == {p: rows for p, rows in by_partition(frame).items() if p not in (0, 3, 5)}


def files_of(folder):
    return sorted(
        os.path.relpath(path, folder)
        for path in glob.glob(os.path.join(folder, "**"), recursive=True)
        if os.path.isfile(path) and not path.endswith(".crc")
    )


def rows_of(spark, folder):
    return sorted(tuple(row) for row in spark.read.parquet(folder).collect())


def test_a_resumed_write_keeps_the_committed_tasks_and_ends_like_a_clean_write(spark, jvm, tmp_path):
    """The first write's tasks 0-3 commit, 4-7 wait until their task folders were copied aside
    (what resume's set-aside does after a crash), then fail. The resumed write computes 4-7
    only and ends with the same folder as a clean write."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    out, clean, kept_dir = (str(tmp_path / name) for name in ("out", "clean", ".kept-out"))
    fail, release = tmp_path / "fail", tmp_path / "release"
    fail.touch()
    seen = spark.sparkContext.accumulator(0)

    @F.udf("long")
    def work(value):
        seen.add(1)
        if os.path.exists(str(fail)) and TaskContext.get().partitionId() >= 4:
            deadline = time.time() + 60
            while not os.path.exists(str(release)) and time.time() < deadline:
                time.sleep(0.05)
            raise RuntimeError("simulated crash")
        return value * 3

    frame = spark.range(0, 4000, 1, 8).withColumn("y", work("id"))
    shape = partitions.shape_of(frame)
    assert (shape.partitions, shape.reusable) == (8, True)  # Spark trusts a UDF to be deterministic by default
    failure: list[BaseException] = []

    def first_attempt():
        try:
            partitions.without_partitions(frame, []).write.mode("overwrite").parquet(out)
        except Exception as error:
            failure.append(error)

    writer = threading.Thread(target=first_attempt)
    writer.start()
    staging = os.path.join(out, "_temporary", "0")
    deadline = time.time() + 120
    while len(glob.glob(os.path.join(staging, "task_*"))) < 4 and time.time() < deadline:
        time.sleep(0.05)
    committed = sorted(glob.glob(os.path.join(staging, "task_*")))
    assert len(committed) == 4
    os.makedirs(kept_dir)
    for folder in committed:
        shutil.copytree(folder, os.path.join(kept_dir, os.path.basename(folder)))
    release.touch()
    writer.join(120)
    assert failure, "the first attempt should have failed"
    # abortJob of the failed write deleted _temporary and the committed task folders with it.
    assert not os.path.exists(os.path.join(out, "_temporary"))
    assert not os.path.exists(os.path.join(out, "_SUCCESS"))
    kept = sorted(int(name.rsplit("_", 1)[1]) for name in os.listdir(kept_dir))
    assert kept == [0, 1, 2, 3]

    fail.unlink()
    seen.value = 0
    before = spark.conf.get(COMMIT_PROTOCOL_CONF, None)
    with partitions.resuming_commit(spark, "file://" + kept_dir, kept):
        partitions.without_partitions(frame, kept).write.mode("overwrite").parquet(out)
    assert spark.conf.get(COMMIT_PROTOCOL_CONF, None) == before
    assert spark.conf.get(KEPT_DIR_CONF, None) is None
    assert seen.value == 2000  # 4 of 8 partitions of 500 rows computed

    partitions.without_partitions(frame, []).write.mode("overwrite").parquet(clean)
    assert rows_of(spark, out) == rows_of(spark, clean) == [(i, i * 3) for i in range(4000)]
    names, clean_names = files_of(out), files_of(clean)
    assert "_SUCCESS" in names and not os.path.exists(os.path.join(out, "_temporary"))
    assert not os.path.exists(kept_dir)
    parts = [name for name in names if name.startswith("part-")]
    assert len(parts) == len([name for name in clean_names if name.startswith("part-")]) == 8
    assert sorted(name[:10] for name in parts) == [f"part-{i:05d}" for i in range(8)]
    assert all(os.path.getsize(os.path.join(out, name)) > 0 for name in parts)


def test_kept_in_place_an_overwrite_empties_the_target_around_them(spark, jvm, tmp_path):
    """What a resumed overwrite on an object store does (driver/tasks/taskresume.py keeps the committed
    task folders where the dead job left them): the kept folder is the target's own job attempt
    folder; the overwrite's delete spares the kept partitions' folders and removes everything else
    (old output, other partitions' folders, tasks in flight, other job attempts); setupJob moves
    nothing; the job commit merges them. Shown on a local folder: the protocol is the same on any
    filesystem."""
    frame, seen = counting_frame(spark, rows=400, slices=4)
    clean, out = str(tmp_path / "clean"), str(tmp_path / "out")
    partitions.without_partitions(frame, []).write.parquet(clean)
    attempt = os.path.join(out, "_temporary", "0")
    donors = {}
    for partition in (0, 1, 2):
        (name,) = [n for n in os.listdir(clean) if n.startswith(f"part-{partition:05d}")]
        task = os.path.join(attempt, f"task_202601010000000000_0000_m_{partition:06d}")
        os.makedirs(task)
        shutil.copy(os.path.join(clean, name), os.path.join(task, name))
        donors[partition] = name
    for junk in ("part-00009-old.parquet", "_temporary/1/task_x/part-00003-x", "_temporary/0/_temporary/attempt_y/z"):
        os.makedirs(os.path.dirname(os.path.join(out, junk)), exist_ok=True)
        open(os.path.join(out, junk), "wb").close()
    seen.value = 0
    with partitions.resuming_commit(spark, "file://" + attempt, [0, 1]):
        partitions.without_partitions(frame, [0, 1]).write.mode("overwrite").parquet(out)
    assert seen.value == 200  # partitions 2 and 3 computed; 2's old folder was not kept, so it went
    assert rows_of(spark, out) == rows_of(spark, clean)
    names = files_of(out)
    assert [n for n in names if not n.startswith("part-")] == ["_SUCCESS"]
    assert sorted(n[:10] for n in names if n.startswith("part-")) == [f"part-{p:05d}" for p in range(4)]
    assert donors[0] in names and donors[1] in names and donors[2] not in names


def test_the_protocol_refuses_folders_that_do_not_match_the_kept_partitions(spark, jvm, tmp_path):
    kept_dir = tmp_path / "kept"
    (kept_dir / "task_202601010000000000_0001_m_000002").mkdir(parents=True)
    frame = spark.range(0, 40, 1, 4)
    with partitions.resuming_commit(spark, "file://" + str(kept_dir), [1]):
        with pytest.raises(Exception, match="task folders hold partitions"):
            partitions.without_partitions(frame, [1]).write.mode("overwrite").parquet(str(tmp_path / "out"))
    assert os.listdir(kept_dir) == ["task_202601010000000000_0001_m_000002"]  # nothing moved


def test_the_protocol_refuses_dynamic_partition_overwrite(spark, jvm, tmp_path):
    frame = spark.range(0, 40, 1, 4).selectExpr("id", "id % 2 AS k")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        with partitions.resuming_commit(spark, None, []):
            with pytest.raises(Exception, match="dynamic partition overwrite"):
                frame.write.mode("overwrite").partitionBy("k").parquet(str(tmp_path / "out"))
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")


def test_shape_says_when_partition_i_holds_other_rows_elsewhere(spark, jvm, tmp_path):
    from pyspark.sql import functions as F

    source = str(tmp_path / "source")
    spark.range(0, 20000, 1, 8).selectExpr("id", "repeat('x', 50) AS pad").write.parquet(source)
    plain = spark.read.parquet(source).where("id % 3 = 0")
    shape = partitions.shape_of(plain)
    assert shape.reusable and shape.reason is None
    assert shape.partitions == len(shape.slices) == plain.rdd.getNumPartitions()
    assert partitions.shape_of(spark.read.parquet(source).where("id % 3 = 0")).digest == shape.digest

    assert "not deterministic" in partitions.shape_of(plain.withColumn("r", F.rand(42))).reason
    assert "current time" in partitions.shape_of(plain.withColumn("t", F.current_timestamp())).reason

    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        smaller = partitions.shape_of(spark.read.parquet(source).where("id % 3 = 0"))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert smaller.reusable and smaller.digest != shape.digest
    assert (smaller.partitions, smaller.slices) != (shape.partitions, shape.slices)


def test_unsupported_reasons(spark, jvm, tmp_path):
    out = str(tmp_path / "out")
    # Without the jar (no JDK, or javac failed against this Spark) the write runs whole instead of
    # failing on the missing class; the session here has it, so ask about a class that is absent.
    assert find_class(jvm, KEPT_RDD_CLASS) is not None
    assert find_class(jvm, "sparkrecover.jvm.NoSuchClass") is None
    assert partitions.write_committer(spark, out, mode="overwrite")[1] is None
    assert partitions.write_committer(spark, "hdfs://namenode:8020/data/out")[1] is None
    # Object stores keep their committed task folders too (a rename there is a copy: the journal
    # says a folder is whole).
    assert partitions.write_committer(spark, "s3a://bucket/out")[1] is None

    assert "algorithm 2" in partitions.write_committer(spark, out, options={partitions.ALGORITHM_KEY: "2"})[1]
    assert "no output path" in partitions.write_committer(spark, None)[1]
    settings = {
        partitions.ALGORITHM_KEY: "algorithm 2",
        COMMIT_PROTOCOL_CONF: "custom commit protocol",
        "spark.sql.parquet.output.committer.class": "custom Parquet output committer",
        "spark.sql.sources.partitionOverwriteMode": "dynamic partition overwrite",
    }
    values = {
        partitions.ALGORITHM_KEY: "2",
        COMMIT_PROTOCOL_CONF: "org.apache.spark.internal.io.HadoopMapReduceCommitProtocol",
        "spark.sql.parquet.output.committer.class": "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
    }
    for key, expected in settings.items():
        spark.conf.set(key, values[key])
        try:
            assert expected in partitions.write_committer(spark, out, mode="overwrite")[1]
        finally:
            spark.conf.unset(key)
    assert partitions.write_committer(spark, out, mode="overwrite")[1] is None


def test_which_committer_a_write_uses_and_what_of_it_is_kept(spark):
    def committer(path: str = "s3a://bucket/out", format: str = "json", mode: str = "overwrite", **settings: str):
        for key, value in settings.items():
            spark.conf.set(key.replace("__", "."), value)
        try:
            return partitions.write_committer(spark, path, format=format, mode=mode)
        finally:
            for key in settings:
                spark.conf.unset(key.replace("__", "."))

    folders, pendingsets = (partitions.FOLDERS, None), (partitions.PENDINGSETS, None)
    # Hadoop's mapred-default binds S3ACommitterFactory to s3a, whose default committer ("file") is
    # FileOutputCommitter: every format keeps task folders.
    assert committer() == folders and committer(format="csv") == folders and committer("/tmp/out") == folders
    magic = {"fs__s3a__committer__name": "magic"}
    # The magic committer (every format but Parquet, which names its own committer) commits
    # pendingsets; with the factory for every format (as where sparkrecover stands in for
    # spark-hadoop-cloud's PathOutputCommitProtocol) Parquet's too.
    assert committer(**magic) == pendingsets
    assert committer(format="parquet", **magic) == folders
    assert committer(format="parquet", sparkrecover__commit__factory="true", **magic) == pendingsets
    assert "S3A directory committer" in committer(fs__s3a__committer__name="directory")[1]
    # The manifest committer's manifests stay in the target's _temporary: kept by writes that keep
    # the target (overwrite empties it through the commit protocol), not by errorifexists.
    manifest = {"mapreduce__outputcommitter__factory__scheme__file": partitions.MANIFEST_COMMITTER_FACTORY}
    assert committer("file:/tmp/out", **manifest) == (partitions.MANIFESTS, None)
    assert partitions.write_committer(spark, "file:/tmp/out", mode="append", format="csv") == folders
    spark.conf.set("mapreduce.outputcommitter.factory.class", partitions.MANIFEST_COMMITTER_FACTORY)
    try:
        assert "errorifexists write needs gone" in partitions.write_committer(spark, "file:/tmp/out", format="csv")[1]
        assert "comes from" not in str(partitions.write_committer(spark, "/tmp/out", mode="append", format="orc"))[1]
    finally:
        spark.conf.unset("mapreduce.outputcommitter.factory.class")
    other = "org.example.CommitterFactory"
    assert other in committer("file:/tmp/out", mapreduce__outputcommitter__factory__class=other)[1]


LISTENER_APP = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    sc.setLocalProperty("sparkrecover.stage", "write-it")
    spark.range(0, 20, 1, 2).collect()  # before the stage's work: no task.committed
    sc.setLocalProperty("sparkrecover.writing", "write-it")
    spark.range(0, 600, 1, 6).write.parquet(sys.argv[1])
    sc.setLocalProperty("sparkrecover.writing.kept", "1,4")
    spark.range(0, 600, 1, 6).write.mode("overwrite").parquet(sys.argv[1])  # 1 and 4: kept, not journaled
    sc.setLocalProperty("sparkrecover.writing.kept", None)
    sc.setLocalProperty("sparkrecover.writing", None)
    sc.setLocalProperty("sparkrecover.stage", None)
    spark.range(0, 10, 1, 3).count()  # outside any stage: no task.committed
    sc._jsc.sc().listenerBus().waitUntilEmpty(10000)
    print("LINES" + sc._jvm.sparkrecover.jvm.bridge.SparkRecoverListener.drain(sc._jsc.sc()))
    spark.stop()
""")


def test_the_listener_reports_each_committed_write_task(jar, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(LISTENER_APP)
    done = subprocess.run(
        [
            find_spark_submit(),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--jars",
            jar,
            "--conf",
            "spark.extraListeners=" + LISTENER_CLASS,
            str(app),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout.split("LINES", 1)[1]
    lines = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    committed = [line for line in lines if line["k"] == "task.committed"]
    jobs = {line["job"] for line in lines if line["k"] == "job.started" and line["stage"] == "write-it"}
    assert sorted(line["partition"] for line in committed) == sorted([*range(6), 0, 2, 3, 5])
    assert {line["stage"] for line in committed} == {"write-it"}
    assert {line["spark_job"] for line in committed} <= jobs and len(jobs) >= 1
    assert all(line["task_attempt"] == 0 and line["bytes"] > 0 and line["records"] == 100 for line in committed)


def test_a_shuffle_s_map_side_and_specs_are_part_of_the_shape(spark, jvm, tmp_path):
    """After a shuffle, partition i is kept when Spark calls it UNORDERED (the same rows): its
    shape covers the map side's input slices and the specs adaptive execution chose."""
    from pyspark.sql import functions as F

    source, other = str(tmp_path / "source"), str(tmp_path / "other")
    spark.range(0, 6000, 1, 6).selectExpr("id", "id % 40 AS k").write.parquet(source)
    spark.range(0, 6000, 1, 6).selectExpr("id", "id % 40 AS k").write.parquet(other)

    def grouped(path):
        return spark.read.parquet(path).groupBy("k").agg(F.sum("id").alias("s"))

    shape = partitions.shape_of(grouped(source))
    assert shape.reusable and shape.executed, shape.reason
    assert shape.specs and shape.specs_digest and len(shape.slices) == shape.partitions
    again = partitions.shape_of(grouped(source))
    assert (again.digest, again.specs) == (shape.digest, shape.specs)
    elsewhere = partitions.shape_of(grouped(other))  # the same plan over other map-side files
    assert elsewhere.specs == shape.specs and elsewhere.slices != shape.slices

    # Round-robin after a shuffle without Spark's local sort: INDETERMINATE, never kept.
    spark.conf.set("spark.sql.execution.sortBeforeRepartition", "false")
    try:
        indeterminate = partitions.shape_of(grouped(source).repartition(3))
    finally:
        spark.conf.unset("spark.sql.execution.sortBeforeRepartition")
    assert not indeterminate.reusable and "INDETERMINATE" in indeterminate.reason
    assert partitions.shape_of(grouped(source).repartition(3)).reusable  # sorted first: UNORDERED

    # A range partitioning's bounds are sampled with a seed made of an RDD id: in the specs.
    ordered = partitions.shape_of(spark.read.parquet(source).orderBy("id"))
    assert ordered.reusable and any(line.startswith("range ") for line in ordered.specs)
