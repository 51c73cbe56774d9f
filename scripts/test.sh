#!/usr/bin/env bash
# The README's test command: idempotent set-up, then the whole suite (one shared Ray session, a timeout on
# every Ray test), then the multi-node tests (tests/cluster: a 3-node Ray cluster of their own, so a second
# pytest process; `-m cluster`). Extra arguments go to the first pytest call.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
exec .venv/bin/python -m pytest -q -p no:cacheprovider -m cluster tests/cluster
