"""Spark's harmless "No stages registered for job N" ERROR dropped in the driver JVM at runtime
(driver/process/log_filter.py), on the session's real log4j2: exactly that message of DAGScheduler's is
denied, every other message of it still reaches the appenders, and the logger keeps its level."""

from __future__ import annotations

import pytest

from sparkrecover.driver.process import log_filter as spark_log
from sparkrecover.driver.process.log_filter import DAG_SCHEDULER

MESSAGES = [
    "No stages registered for job 12",  # the one dropped
    "No stages registered for job 12 (retry)",
    "No stages registered for job",
    "Job 12 failed: count at <stdin>:1, took 0.1 s",
    "Missing parents: List()",
]


@pytest.fixture
def log4j(spark):
    """The session JVM's log4j2 context, configuration and a writer appender capturing what the
    DAGScheduler logger lets through; the DAGScheduler logger configuration is removed before and
    after, so each test starts from the session's own configuration."""
    jvm = spark.sparkContext._jvm
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    config.removeLogger(DAG_SCHEDULER)
    context.updateLoggers()
    captured = jvm.java.io.StringWriter()
    appender = jvm.org.apache.logging.log4j.core.appender.WriterAppender.createAppender(
        None, None, captured, "sparkrecover-test-capture", False, True
    )
    appender.start()
    try:
        yield jvm, context, config, appender, captured
    finally:
        config.removeLogger(DAG_SCHEDULER)
        context.updateLoggers()
        appender.stop()


def log_through_dag_scheduler(jvm, context, config, appender) -> None:
    config.getLoggerConfig(DAG_SCHEDULER).addAppender(appender, None, None)
    context.updateLoggers()
    logger = jvm.org.apache.logging.log4j.LogManager.getLogger(DAG_SCHEDULER)
    for message in MESSAGES:
        logger.error(message)
    logger.warn(MESSAGES[0])  # the same words at another level are dropped too: it is the message


def test_exactly_that_message_of_dag_schedulers_is_dropped_and_its_level_kept(log4j):
    jvm, context, config, appender, captured = log4j
    level_before = jvm.org.apache.logging.log4j.LogManager.getLogger(DAG_SCHEDULER).getLevel().toString()

    assert spark_log.drop_no_stages_registered(jvm) is None
    assert spark_log.drop_no_stages_registered(jvm) is None  # a second SparkContext: one filter
    own = config.getLoggerConfig(DAG_SCHEDULER)
    assert own.getName() == DAG_SCHEDULER and own.isAdditive()
    assert own.getLevel().toString() == level_before  # inherited from its parent, as before
    assert "CompositeFilter" not in own.getFilter().getClass().getName()

    log_through_dag_scheduler(jvm, context, config, appender)
    assert captured.toString().splitlines() == MESSAGES[1:]


def test_a_users_own_dag_scheduler_logger_keeps_its_level_and_gets_the_filter(log4j):
    jvm, context, config, appender, captured = log4j
    core = jvm.org.apache.logging.log4j.core
    users = (
        core.config.LoggerConfig.newBuilder()
        .withLoggerName(DAG_SCHEDULER)
        .withLevel(jvm.org.apache.logging.log4j.Level.ERROR)
        .withAdditivity(True)
        .withConfig(config)
        .build()
    )
    config.addLogger(DAG_SCHEDULER, users)
    context.updateLoggers()

    assert spark_log.drop_no_stages_registered(jvm) is None
    assert config.getLoggerConfig(DAG_SCHEDULER).getLevel().toString() == "ERROR"

    log_through_dag_scheduler(jvm, context, config, appender)
    assert captured.toString().splitlines() == MESSAGES[1:]  # its ERRORs; its WARN was below its level


def test_a_jvm_without_log4j2s_core_says_why_and_raises_nothing():
    class NoLog4j:
        def __getattr__(self, name):
            raise RuntimeError("py4j: class not found")

    assert spark_log.drop_no_stages_registered(NoLog4j()) == "RuntimeError: py4j: class not found"
