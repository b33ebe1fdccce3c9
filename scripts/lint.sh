#!/usr/bin/env bash
# Lint: set up with the test extras (which bring ruff and mypy), then ruff (rules and format) on the whole tree and
# mypy on the package (its settings are in pyproject.toml). Exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
