#!/usr/bin/env bash
# The test command: set up (or verify) .venv, then run the whole suite on 2 workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash setup.sh
# One torch thread per worker (also for the fairseq CLIs the tests spawn).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# -rsx: the summary lists every skipped test (e.g. tests/test_cuda.py without a
# CUDA device) and expected failure with its reason, so none passes silently.
exec .venv/bin/python -m pytest -n "${POSNET_TEST_WORKERS:-2}" -q -rsx -p no:cacheprovider tests "$@"
