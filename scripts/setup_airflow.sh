#!/usr/bin/env bash
# Create ./.venv-airflow: Apache Airflow, the Spark provider and sparkrecover[airflow] from this
# checkout, for scripts/test_airflow.sh. An environment of its own, not .venv: the provider requires
# pyspark-client, whose Python files replace pyspark's, and the suite's pyspark must not change.
# Here pyspark and pyspark-client are pinned to one version (the newest pyspark-client there is), so
# the Python files and the jars agree (`sparkrecover doctor` checks that). Idempotent like setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-airflow
# pyspark-client stops at 4.2.0: pyspark is held there with it (docs/launchers.md, "Airflow").
spark_version="${SPARKRECOVER_AIRFLOW_SPARK:-4.2.0}"
if [ -n "${PYTHON:-}" ]; then python="$PYTHON"
elif command -v python3.11 >/dev/null; then python=python3.11
else python=python3
fi
command -v java >/dev/null || { echo "setup_airflow: java not found: Spark needs a JDK 17 on PATH" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
stamp="$venv/.sparkrecover-installed-airflow"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup_airflow: installing sparkrecover[airflow] with pyspark $spark_version into $venv (a few minutes the first time)" >&2
  constraints=$(mktemp)
  printf 'pyspark==%s\npyspark-client==%s\n' "$spark_version" "$spark_version" >"$constraints"
  "$venv/bin/python" -m pip install --quiet -c "$constraints" -e '.[airflow]' "pyspark==$spark_version" 'pytest>=8'

  rm -f "$constraints"
  touch "$stamp"
fi
