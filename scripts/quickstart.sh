#!/usr/bin/env bash
# Set up and run the quickstart end to end: precompile a small model, save the pair, load it
# in a fresh process with empty compiler caches, and write the report page.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/quickstart.py "$@"
