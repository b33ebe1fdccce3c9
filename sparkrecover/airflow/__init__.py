"""Run a PySpark application under sparkrecover from Apache Airflow (the ``[airflow]`` extra):
``SparkRecoverSubmitOperator``, the Spark provider's ``SparkSubmitOperator`` with a run per task
instance (docs/launchers.md, "Airflow")."""

from __future__ import annotations

try:
    from sparkrecover.airflow.operators import SparkRecoverSubmitOperator
except ImportError as missing:  # the provider, or Airflow itself
    raise ImportError(
        f"sparkrecover.airflow needs Airflow's Spark provider ({missing}): install sparkrecover with its "
        "[airflow] extra, or apache-airflow-providers-apache-spark, in the Airflow workers' Python"
    ) from missing

__all__ = ["SparkRecoverSubmitOperator"]
