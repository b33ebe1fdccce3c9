"""The driver process itself: which attempt of its run it is (``which_attempt``), this attempt's
state (``runtime``), the lease it checks before a stage writes or commits (``fence``), the signals
that stop it (``signals``), what it asks of Spark's JVM (``compiled_pyspark``, ``log_filter``,
``hadoopfs``) and the listener it drains (``telemetry``, ``py4j_listener``)."""
