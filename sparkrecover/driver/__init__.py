"""What runs inside the Spark driver, under ``spark-submit``: the bootstrap, the runtime, the
public API (``import sparkrecover as sr``), stage scopes, the zero-code hooks on pyspark's
writers, fingerprints and the bridge from the JVM listener. Never imports ``sparkrecover.cli``."""
