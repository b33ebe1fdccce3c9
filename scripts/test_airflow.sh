#!/usr/bin/env bash
# The Airflow leg (CI runs it after the Spark 3.5 leg): set up ./.venv-airflow (Apache Airflow, its
# Spark provider, sparkrecover[airflow]; scripts/setup_airflow.sh), then run there the DAG of
# docs/launchers.md with `airflow tasks test`: the driver killed in its write, the same task again
# resumes without appending twice, a third try runs nothing, a second DAG run computes again
# (tests/airflow_leg). Its own conftest only: the suite's (tests/conftest.py) is for .venv.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_airflow.sh
python=.venv-airflow/bin/python
versions=$("$python" -c 'import airflow, pyspark; print(airflow.__version__, pyspark.__version__)')
echo "test_airflow: Airflow and pyspark $versions" >&2
# The pyspark Airflow's provider brought must agree with its jars, or nothing here means much.
.venv-airflow/bin/sparkrecover doctor --root "${TMPDIR:-/tmp}/sparkrecover-doctor-$$" >&2
exec "$python" -m pytest --confcutdir=tests/airflow_leg -p no:cacheprovider -q tests/airflow_leg "$@"
