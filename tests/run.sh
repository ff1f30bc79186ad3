#!/usr/bin/env bash
# The test command: set up (or verify) .venv, then run the whole suite on 2 workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash setup.sh
exec .venv/bin/python -m pytest -n "${POSNET_TEST_WORKERS:-2}" -q -p no:cacheprovider tests "$@"
