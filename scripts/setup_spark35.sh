#!/usr/bin/env bash
# Create ./.venv-spark35: sparkrecover (editable, test extras) on pyspark 3.5, the oldest Spark the
# package supports (pyproject says pyspark>=3.5; ./.venv gets the newest). Used by
# scripts/test_spark35.sh. Idempotent like setup.sh: a second call only re-checks.
# pyspark 3.5 supports Python 3.8 to 3.11, so this picks python3.11 unless $PYTHON says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-spark35
if [ -n "${PYTHON:-}" ]; then python="$PYTHON"
elif command -v python3.11 >/dev/null; then python=python3.11
else python=python3
fi
command -v java >/dev/null || { echo "setup_spark35: java not found: Spark needs a JDK/JRE 17 on PATH" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info < (3, 12))' \
  || { echo "setup_spark35: $python is not Python 3.10 or 3.11 (pyspark 3.5 stops at 3.11; set PYTHON)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
stamp="$venv/.sparkrecover-installed-test"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup_spark35: installing sparkrecover[test] with pyspark 3.5 into $venv (a few minutes the first time)" >&2
  "$venv/bin/python" -m pip install --quiet -e '.[test]' 'pyspark==3.5.*'
  touch "$stamp"
fi
# The S3 cases of scripts/test_spark35.sh need hadoop-aws, which pyspark does not bundle:
# the main venv's copy when setup.sh fetched one, else fetched here.
if [ -d .venv/s3a-jars ] && [ ! -e "$venv/s3a-jars" ]; then
  cp -r .venv/s3a-jars "$venv/s3a-jars"
fi
"$venv/bin/python" scripts/fetch_s3a_jars.py
