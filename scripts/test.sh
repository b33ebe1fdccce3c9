#!/usr/bin/env bash
# The README's second command: set up with the test extras, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
