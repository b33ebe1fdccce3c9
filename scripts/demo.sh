#!/usr/bin/env bash
# The README's first command: set up, then run the demo pipeline, SIGKILL its driver mid-way,
# resume it, and inspect it. The journal goes to ./.sparkrecover (the embedded default).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
