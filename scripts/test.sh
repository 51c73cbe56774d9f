#!/usr/bin/env bash
# The README's test command: idempotent set-up, then the whole suite (one shared Ray session, a timeout on
# every Ray test). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
