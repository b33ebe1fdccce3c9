"""One harmless ERROR of Spark's dropped in the driver JVM, whatever its log configuration
(docs/cli-output.md, "Spark's own log").

Spark's DAGScheduler logs ``ERROR DAGScheduler: No stages registered for job N`` when it cleans up
a map-stage job twice, which happens when every map output of the stage was registered before it
ran: kept map outputs a resume reused. Nothing failed, but operators alert on ERROR lines. Once the
script's SparkContext exists, the bootstrap adds a log4j2 regex filter (deny exactly that message,
neutral to anything else) to the DAGScheduler logger's configuration: a driver started by
``submit``, by ``spark-submit-args``' line, restarted by a launcher, or logging through the user's
own log4j2 configuration drops it alike. Spark 3.5 and 4 both log through log4j2's core.
"""

from __future__ import annotations

from typing import Any

DAG_SCHEDULER = "org.apache.spark.scheduler.DAGScheduler"
# Matched against the whole message (log4j2's RegexFilter uses ``matches``): a longer message
# that merely contains it goes through.
NO_STAGES_REGISTERED = r"No stages registered for job \d+"


def drop_no_stages_registered(jvm: Any) -> str | None:
    """Deny Spark's "No stages registered for job N" ERROR in this JVM's log4j2 configuration, once;
    None when done (or already done), else why not (a logging backend other than log4j2's core).
    The DAGScheduler logger keeps its level, appenders and additivity: a logger configuration
    created for it has no level and no appender of its own, so it inherits its parent's."""
    try:
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        core = jvm.org.apache.logging.log4j.core
        result = core.Filter.Result
        deny = core.filter.RegexFilter.createFilter(NO_STAGES_REGISTERED, None, False, result.DENY, result.NEUTRAL)
        found = config.getLoggerConfig(DAG_SCHEDULER)
        if found.getName() == DAG_SCHEDULER:
            if _has_filter(found):
                return None
            found.addFilter(deny)
        else:
            own = (
                core.config.LoggerConfig.newBuilder()
                .withLoggerName(DAG_SCHEDULER)
                .withAdditivity(True)
                .withConfig(config)
                .withtFilter(deny)  # log4j2's own spelling of the builder's method
                .build()
            )
            config.addLogger(DAG_SCHEDULER, own)
        context.updateLoggers()
    except Exception as error:  # py4j's errors, a JVM without log4j2's core classes
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return None


def _has_filter(logger_config: Any) -> bool:
    """Whether ``logger_config`` already denies the message (a second SparkContext in one driver)."""
    found = logger_config.getFilter()
    if found is None:
        return False
    filters = found.getFiltersArray() if found.getClass().getSimpleName() == "CompositeFilter" else [found]
    return any(NO_STAGES_REGISTERED in str(f.toString()) for f in filters)
