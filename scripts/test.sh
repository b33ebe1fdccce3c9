#!/usr/bin/env bash
# The README's second command: set up with the test extras, then run the whole test suite on three
# pytest-xdist workers, each file's tests on one worker (its module fixtures, a standalone cluster
# or a reference run, are built once): docs/contributing.md has the measurements.
# SPARKRECOVER_TEST_WORKERS=N picks another number (0: one process, no workers). Extra arguments
# go to pytest. The slowest tests are listed at the end: CI's time is watched (under 30 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
workers="${SPARKRECOVER_TEST_WORKERS:-3}"
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile --durations=15 "$@"
