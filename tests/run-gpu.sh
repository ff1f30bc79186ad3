#!/usr/bin/env bash
# The GPU suite, one command (docs/install.md, "GPU suite"). Needs a CUDA device
# and fails without one.
#
#   bash tests/run-gpu.sh [tests|bench|all] [pytest args...]     (default: all)
#
#   1. installs into the current environment, keeping its CUDA torch
#      (setup.sh --current-env; POSNET_SKIP_SETUP=1 skips it)
#   2. tests: tests/test_cuda.py with CUDA required (POSNET_REQUIRE_CUDA=1),
#      extra arguments go to pytest (e.g. -k contract, to split the run)
#   3. bench: python -m posnet_fairseq.benchmark.train_speed and posnet_fairseq.benchmark.decode_speed
#      on the GPU
#
# Logs and tables go to $POSNET_GPU_OUT (default runs/gpu/<time>), each headed by
# the device name. The exit status is non-zero if any part failed or could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

part=all
case "${1:-}" in
  tests|bench|all) part=$1; shift ;;
esac
PYTHON=${PYTHON:-$(command -v python || command -v python3)}
if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "run-gpu: no CUDA device visible to $PYTHON (torch.cuda.is_available() is False): this suite needs one" >&2
  exit 1
fi
[ "${POSNET_SKIP_SETUP:-0}" = 1 ] || PYTHON="$PYTHON" bash setup.sh --current-env

out=${POSNET_GPU_OUT:-runs/gpu/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
"$PYTHON" -c 'import torch; print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")' \
  | tee "$out/device.txt"

status=0
if [ "$part" != bench ]; then
  # -v: a line per test as it ends, so that a run stopped by a time limit says which tests it did not reach.
  POSNET_REQUIRE_CUDA=1 "$PYTHON" -m pytest -v -rsx -p no:cacheprovider tests/test_cuda.py "$@" 2>&1 \
    | tee "$out/test_cuda.log" || status=1
fi
if [ "$part" != tests ]; then
  "$PYTHON" -m posnet_fairseq.benchmark.train_speed --device cuda 2>&1 | tee "$out/train_speed.md" || status=1
  # The decoding benchmark: beam 4, batch 32 and 128, forced 30/80/200 tokens.
  for batch in 32 128; do
    "$PYTHON" -m posnet_fairseq.benchmark.decode_speed --device cuda --batch-size "$batch" --lengths 30,80,200 \
      --archs transformer,transformer_nosa,aan_plus_avg,aan_plus_ner,aan_plus_far,aan_plus_wet,rposnet_transformer_base,hc_gaussian,tisa_transformer_base \
      2>&1 | tee "$out/decode_speed_batch$batch.md" || status=1
  done
fi
echo "run-gpu: results in $out"
exit $status
