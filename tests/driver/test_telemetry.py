"""The JVM listener's per-stage summaries against Spark's own status tracker (in process), and the
bootstrap's fallback to the Py4J listener when the class is missing."""

from __future__ import annotations

import pytest

from sparkrecover.driver.process.runtime import STAGE_PROPERTY, Runtime
from sparkrecover.driver.process.telemetry import JVM, Telemetry, _parse_lines
from sparkrecover.journal import JournalWriter, read_journal
from sparkrecover.journal import events as ev
from sparkrecover.jvm import LISTENER_CLASS, WRITING_PROPERTY
from sparkrecover.launch import launcher
from sparkrecover.launch.jvm_files import listener_jar
from sparkrecover.rundir.runs import Run
from tests.helpers import summary_counts

# -- in process: the listener added to the shared session through its own class loader -----------


@pytest.fixture(scope="module")
def jvm_listener(spark, listener_cache):
    """The listener's drain as the bootstrap sees it. The shared session started without the jar,
    so the class is loaded here, on top of Spark's class loader, and added to the running context."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARKRECOVER_CACHE", listener_cache)
        jar = listener_jar.ensure_jar(launcher.find_spark_submit()).path
    assert jar, "the listener jar could not be built"
    sc = spark.sparkContext
    gateway, jvm, jsc = sc._gateway, sc._jvm, sc._jsc.sc()
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(jar).toURI().toURL()
    loader = jvm.java.net.URLClassLoader(urls, jsc.getClass().getClassLoader())
    cls = loader.loadClass(LISTENER_CLASS)
    listener = cls.getConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
        gateway.new_array(jvm.java.lang.Object, 0)
    )
    jsc.addSparkListener(listener)
    parameters = gateway.new_array(jvm.java.lang.Class, 1)
    parameters[0] = jsc.getClass()
    method = cls.getMethod("drain", parameters)

    def drain() -> list[dict]:
        jsc.listenerBus().waitUntilEmpty(60_000)  # both the status store and the listener are fed
        arguments = gateway.new_array(jvm.java.lang.Object, 1)
        arguments[0] = jsc
        return _parse_lines(method.invoke(None, arguments))

    drain.listener_class = cls  # type: ignore[attr-defined]  # for the static methods
    drain()  # whatever earlier tests left
    yield drain
    jsc.removeSparkListener(listener)


def journal_of(tmp_path, drain) -> tuple[Runtime, Telemetry]:
    run_dir = str(tmp_path / "run")
    rt = Runtime(JournalWriter(Run("r", run_dir), 1, ev.WRITER_DRIVER, flush_interval=0), run_dir)
    telemetry = Telemetry(rt)
    telemetry.use(JVM, drain)
    return rt, telemetry


def journaled(rt: Runtime, telemetry: Telemetry, event_type: str) -> list[dict]:
    telemetry.sync()
    rt.writer.flush()
    return [r for r in read_journal(rt.run_dir) if r["type"] == event_type]


def tracker_counts(spark, spark_stage: int) -> dict:
    info = spark.sparkContext.statusTracker().getStageInfo(spark_stage)
    return {"tasks": info.numTasks, "completed_tasks": info.numCompletedTasks, "failed_tasks": info.numFailedTasks}


def test_stage_summaries_carry_the_pipeline_stage_and_match_the_status_tracker(spark, tmp_path, jvm_listener):
    rt, telemetry = journal_of(tmp_path, jvm_listener)
    sc = spark.sparkContext
    sc.setLocalProperty(STAGE_PROPERTY, "daily")
    try:
        rows = spark.range(1000, numPartitions=5).selectExpr("id % 3 AS k").groupBy("k").count().collect()
    finally:
        sc.setLocalProperty(STAGE_PROPERTY, None)
    assert sorted(r["count"] for r in rows) == [333, 333, 334]
    spark.range(10, numPartitions=2).count()  # outside any pipeline stage

    completed = journaled(rt, telemetry, ev.SPARK_STAGE_COMPLETED)
    daily = [r for r in completed if r["stage"] == "daily"]
    assert daily and {r["stage"] for r in completed} == {"daily", None}
    for record in completed:
        assert summary_counts(record) == tracker_counts(spark, record["spark_stage"])
        assert record["killed_tasks"] == 0 and record["failure"] is None
        assert record["metrics"]["duration_ms"] >= 0
        assert record["metrics"]["executor_run_time_ms"] >= 0
    assert sum(r["metrics"]["shuffle_write_bytes"] for r in daily) > 0
    started = journaled(rt, telemetry, ev.SPARK_JOB_STARTED)
    assert {r["stage"] for r in started} == {"daily", None}
    assert rt.jobs_of("daily") == [r["job"] for r in started if r["stage"] == "daily"]
    ended = journaled(rt, telemetry, ev.SPARK_JOB_ENDED)
    assert sorted(r["job"] for r in ended) == sorted(r["job"] for r in started)
    assert all(r["succeeded"] for r in ended)


def _fail(_):
    raise ValueError("deliberate task failure")


def test_a_failing_task_is_counted_as_the_status_tracker_counts_it(spark, tmp_path, jvm_listener):
    rt, telemetry = journal_of(tmp_path, jvm_listener)
    sc = spark.sparkContext
    sc.setLocalProperty(STAGE_PROPERTY, "doomed")
    try:
        with pytest.raises(Exception, match="deliberate task failure"):
            sc.parallelize([1], 1).map(_fail).collect()
    finally:
        sc.setLocalProperty(STAGE_PROPERTY, None)
    (record,) = journaled(rt, telemetry, ev.SPARK_STAGE_COMPLETED)
    assert record["stage"] == "doomed"
    assert (
        summary_counts(record)
        == tracker_counts(spark, record["spark_stage"])
        == {"tasks": 1, "completed_tasks": 0, "failed_tasks": 1}
    )
    assert "deliberate task failure" in record["failure"]
    (ended,) = journaled(rt, telemetry, ev.SPARK_JOB_ENDED)
    assert ended["stage"] == "doomed" and ended["succeeded"] is False and "JobFailed" in ended["failure"]


def test_the_bootstrap_falls_back_when_the_class_is_missing(spark, tmp_path, capsys):
    """--listener jvm but no jar on the classpath (a user overrode --jars in a strange way): the
    Py4J listener is used, with a warning, and events are still journaled."""
    run_dir = str(tmp_path / "run")
    rt = Runtime(JournalWriter(Run("r", run_dir), 1, ev.WRITER_DRIVER, flush_interval=0), run_dir)
    telemetry = Telemetry(rt, JVM, interval=0.05)
    telemetry.attach(spark.sparkContext)
    try:
        assert telemetry.kind == "py4j"
        assert "not registered" in capsys.readouterr().err
        spark.sparkContext.setLocalProperty(STAGE_PROPERTY, "late")
        spark.range(10, numPartitions=2).count()
    finally:
        spark.sparkContext.setLocalProperty(STAGE_PROPERTY, None)
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
        closing = telemetry.close()  # the Py4J listener goes quiet; it stays on the shared session
    rt.writer.close()
    assert closing == {"listener": "py4j", "spark_events_dropped": 0}
    assert "late" in {r["stage"] for r in read_journal(run_dir) if r["type"] == ev.SPARK_JOB_STARTED}


def test_kept_map_outputs_of_one_drain_become_one_shuffle_committed_per_shuffle(tmp_path):
    from tests.helpers import install_runtime, journal

    rt = install_runtime(tmp_path)
    telemetry = Telemetry(rt)
    lines = [
        {"k": "shuffle.registered", "shuffle": "a", "spark_shuffle": 0, "stage": "w", "maps": 3, "reduces": 2},
        *(
            {
                "k": "shuffle.map",
                "shuffle": identity,
                "spark_shuffle": 0,
                "stage": "w",
                "map": index,
                "path": f"{identity}/map-{index}",
                "data_bytes": 10,
                "index_bytes": 24,
                "records": 1,
                "row_bytes": 8,
            }
            for identity, index in (("a", 0), ("b", 0), ("a", 2))
        ),
    ]
    telemetry.use(JVM, lambda: [dict(line) for line in lines])
    telemetry.sync()
    assert [r["shuffle"] for r in journal(rt, ev.SHUFFLE_REGISTERED)] == ["a"]
    batches = {r["shuffle"]: [m["map"] for m in r["maps"]] for r in journal(rt, ev.SHUFFLE_COMMITTED)}
    assert batches == {"a": [0, 2], "b": [0]}


def _invoke_static(spark, cls, name: str, *arguments):
    """Call a static method of the listener class loaded by ``jvm_listener``'s class loader."""
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    types = gateway.new_array(jvm.java.lang.Class, len(arguments))
    values = gateway.new_array(jvm.java.lang.Object, len(arguments))
    for i, value in enumerate(arguments):
        types[i] = jvm.java.lang.Long.TYPE
        values[i] = jvm.java.lang.Long(value)
    return cls.getMethod(name, types).invoke(None, values)


def test_finished_work_wakes_the_drain_and_wake_ends_a_wait(spark, jvm_listener):
    """A write task's commit is signalled at once (the drain need not wait its interval), other
    events are not, and wake() ends a wait, as the driver does at its end."""
    import threading

    sc = spark.sparkContext
    cls = jvm_listener.listener_class
    spark.range(10, numPartitions=2).count()  # outside any pipeline stage: nothing signalled
    jvm_listener()
    assert _invoke_static(spark, cls, "awaitCoordinatorLines", 200) is False
    sc.setLocalProperty(STAGE_PROPERTY, "signalled")
    sc.setLocalProperty(WRITING_PROPERTY, "signalled")
    try:
        sc.parallelize(range(10), 2).count()  # one result stage of two tasks
    finally:
        sc.setLocalProperty(STAGE_PROPERTY, None)
        sc.setLocalProperty(WRITING_PROPERTY, None)
    sc._jsc.sc().listenerBus().waitUntilEmpty(60_000)
    assert _invoke_static(spark, cls, "awaitCoordinatorLines", 60_000) is True
    assert {r["partition"] for r in jvm_listener() if r["k"] == "task.committed"} == {0, 1}
    assert _invoke_static(spark, cls, "awaitCoordinatorLines", 0) is False  # the drain consumed it

    returned: list[bool] = []
    waiting = threading.Thread(
        target=lambda: returned.append(_invoke_static(spark, cls, "awaitCoordinatorLines", 600_000))
    )
    waiting.start()
    while not returned and waiting.is_alive():
        cls.getMethod("wake", sc._gateway.new_array(sc._jvm.java.lang.Class, 0)).invoke(
            None, sc._gateway.new_array(sc._jvm.java.lang.Object, 0)
        )
        waiting.join(0.1)
    assert returned == [False]


def test_the_drain_thread_journals_finished_work_without_waiting_for_its_interval(tmp_path):
    """The JVM says a commit is waiting: the thread drains it and the writer writes it, though
    both intervals are an hour (a driver killed a moment later has it on storage)."""
    import threading

    run_dir = str(tmp_path / "run")
    rt = Runtime(JournalWriter(Run("r", run_dir), 1, ev.WRITER_DRIVER, flush_interval=3600), run_dir)
    telemetry = Telemetry(rt, interval=3600)
    signalled = threading.Event()
    lines = [{"k": "task.committed", "stage": "w", "partition": 7}]

    def await_work(_ms: int) -> bool:
        signalled.wait()
        return bool(lines)

    telemetry.use(JVM, lambda: [lines.pop()] if lines else [], await_work, signalled.set)
    telemetry.start()
    try:
        signalled.set()
        found = []
        for _ in range(600):
            found = [r for r in read_journal(run_dir) if r["type"] == ev.TASK_COMMITTED]
            if found:
                break
            threading.Event().wait(0.05)
        assert [r["partition"] for r in found] == [7]
    finally:
        telemetry.close()
        rt.writer.close()


def test_an_executor_lost_is_journaled_with_its_host_and_one_the_driver_let_go_is_not(spark, tmp_path, jvm_listener):
    """Spark's own executor events, handed to the listener: a kill is ``executor.lost`` with the host
    its ``SparkListenerExecutorAdded`` named; an executor the driver let go stays
    ``spark.executor.removed`` (dynamic allocation's idle executors lost nothing)."""
    sc = spark.sparkContext
    gateway, jvm = sc._gateway, sc._jvm
    cls = jvm_listener.listener_class
    listener = cls.getConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
        gateway.new_array(jvm.java.lang.Object, 0)
    )
    scheduler = jvm.org.apache.spark.scheduler
    logs = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    for executor, host in (("7", "10.0.0.7"), ("8", "10.0.0.8")):
        info = scheduler.cluster.ExecutorInfo(host, 1, logs)
        listener.onExecutorAdded(scheduler.SparkListenerExecutorAdded(1000, executor, info))
    listener.onExecutorRemoved(scheduler.SparkListenerExecutorRemoved(2000, "7", "Command exited with code 137"))
    listener.onExecutorRemoved(scheduler.SparkListenerExecutorRemoved(3000, "8", "Executor killed by driver."))
    rt, telemetry = journal_of(tmp_path, jvm_listener)
    (lost,) = journaled(rt, telemetry, ev.EXECUTOR_LOST)
    assert (lost["executor"], lost["host"], lost["reason"], lost["time_ms"]) == (
        "7", "10.0.0.7", "Command exited with code 137", 2000
    )  # fmt: skip
    (removed,) = [r for r in read_journal(rt.run_dir) if r["type"] == ev.SPARK_EXECUTOR_REMOVED]
    assert removed["executor"] == "8" and "host" not in removed
