#!/usr/bin/env bash
# A prepared GPU run (issue 48, item 6; docs/gpu/README.md): what only a GPU can measure,
# in about 9 minutes on one GPU with no network, each part under its own time limit.
#
#   bash tests/gpu-measure.sh          in the repository root of the GPU machine
#
#   install   fairseq-fixed and the runtime dependencies the machine lacks, from the wheels carried in
#             .whl/ (pip --no-index --no-deps; built and fetched by tests/gpu-wheels.sh); the plugin is
#             imported from the working tree
#   device    the GPU, torch, CUDA and the driver
#   opcounts  operators (CUDA kernels) per decoding and per training step (benchmark.op_counts)
#   decode    decoding speed at batch 128, 80 tokens, beam 4, 8 mechanisms (benchmark.decode_speed)
#   train     training speed at base, amp, 128 x 30 tokens (benchmark.train_speed)
#   ctranslate2  the CTranslate2 Transformer on the GPU against fairseq's in the same run; not run when
#             CTranslate2's CUDA library ($POSNET_CT2_LIBRARY, default libcublas.so.12: its 4.x wheels are
#             built against CUDA 12) does not load, as on a machine with CUDA 13 only
#
# Writes $POSNET_GPU_DOCS/DATE-DEVICE/ (default docs/gpu/): one log or table per part and summary.md, which
# says what ran, what stopped at its limit and what was not measured. With $OUT set (the device tool's
# output folder) it also writes there the folder as gpu-run.tar.gz and summary.md.
# Each part's limit in seconds: POSNET_LIMIT_INSTALL, _OPCOUNTS, _DECODE, _TRAIN, _CTRANSLATE2.
# POSNET_COMMIT names the code in the summary where the copy has no .git, or one that is not the working
# tree's (the device tool's copy: pass the hash from the machine that sent it). POSNET_GPU_FAKE=1 runs the same
# parts on the CPU with tiny models and checks the install instead of running it (tests/test_gpu_measure.py);
# POSNET_GPU_ARCHS_{OPCOUNTS,DECODE,TRAIN} replace the arch lists; POSNET_GPU_DECODE_ROUNDS (5),
# POSNET_GPU_TRAIN_ROUNDS (5) and POSNET_GPU_TRAIN_STEPS (30) shorten a run that has less device time;
# POSNET_GPU_PLAIN_BEAM names archs also decoded with --no-beamable-mm (decode_speed --plain-beam; default none).
# The exit status is non-zero if any part failed or stopped at its limit.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
fake=${POSNET_GPU_FAKE:-0}
wheels=${POSNET_WHEELS:-.whl}
started=$(date +%s)

if [ "$fake" = 1 ]; then
  device=cpu
  slug=fake-cpu
  ops_args=(--size tiny --vocab 64 --batch-size 2 --train-batch 2 --train-length 8 --source-length 8 --step 4)
  decode_args=(--quick)
  ct2_args=(--quick)
  train_args=(--quick)
else
  if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu-measure: no CUDA device visible to $PYTHON (torch.cuda.is_available() is False)" >&2
    exit 1
  fi
  device=cuda
  # "NVIDIA H100 80GB HBM3" -> h100
  slug=$("$PYTHON" -c 'import re, torch; n = torch.cuda.get_device_name()
m = re.search(r"\b[A-Z]\d{2,4}\b", n); print((m.group(0) if m else re.sub(r"\W+", "-", n)).lower())')
  ops_args=(--batch-size 128 --train-batch 128)
  decode_args=(--batch-size 128 --lengths 80 --sentences 256 --rounds "${POSNET_GPU_DECODE_ROUNDS:-5}")
  ct2_args=(--batch-size 128 --lengths 80 --sentences 256 --rounds 3)
  # 3 rounds of 20 steps left the H100's rounds 10% apart (2026-11-27): 5 of 30 unless a short run asks less
  train_args=(--memory-cap-gib 0 --rounds "${POSNET_GPU_TRAIN_ROUNDS:-5}" --steps "${POSNET_GPU_TRAIN_STEPS:-30}")
fi
# --plain-beam ARCHS: also these decoded with the cross attention per hypothesis (--no-beamable-mm); on CUDA that
# is already the default (models/beam_shared.py: BEAMABLE_DEVICES, from the H200 run of 2026-11-28)
[ -n "${POSNET_GPU_PLAIN_BEAM:-}" ] && decode_args+=(--plain-beam "$POSNET_GPU_PLAIN_BEAM")
ops_archs=${POSNET_GPU_ARCHS_OPCOUNTS:-transformer,aan_plus_avg,hc_gaussian,rposnet_transformer,tisa_transformer,aposnet_transformer,rope_transformer,alibi_transformer}
decode_archs=${POSNET_GPU_ARCHS_DECODE:-transformer,aan_plus_avg,hc_gaussian,rposnet_transformer,tisa_transformer,aposnet_transformer,rope_transformer,alibi_transformer}
train_archs=${POSNET_GPU_ARCHS_TRAIN:-transformer,transformer_nosa,rposnet_transformer,aposnet_transformer,tisa_transformer,rope_transformer,alibi_transformer}

dir=${POSNET_GPU_DOCS:-docs/gpu}/$(date -u +%Y-%m-%d)-$slug
# A second run on one day gets its own folder (DATE-DEVICE-2, ...): writing into the first would mix the two
# runs' files (seen on the H100: a part the second run skipped kept the first run's log).
if [ -e "$dir" ]; then
  n=2
  while [ -e "$dir-$n" ]; do n=$((n + 1)); done
  dir=$dir-$n
fi
mkdir -p "$dir"
work=$(mktemp -d)
summary=$dir/summary.md
rows=()      # the summary's table rows
missing=()   # what was not measured, and why
status=0

# run PART LIMIT FILE COMMAND...: COMMAND's output to $dir/FILE under LIMIT seconds; a table row for it.
run() {
  local part=$1 limit=$2 file=$3 t0 rc result
  shift 3
  t0=$(date +%s)
  echo "gpu-measure: $part (limit ${limit}s): $*" >&2
  # through bash, so that COMMAND may be one of the functions below (exported)
  timeout --kill-after=10 "$limit" bash -c '"$@"' gpu-measure "$@" > "$dir/$file" 2>&1
  rc=$?
  case $rc in
    0) result="done" ;;
    124|137) result="stopped at its limit: what its log shows unfinished was not measured"; status=1
             missing+=("$part: stopped after ${limit}s (the rounds its log lists are all it reached)") ;;
    *) result="failed (exit $rc): see its log"; status=1; missing+=("$part: failed (exit $rc), see $file") ;;
  esac
  rows+=("| $part | \`$*\` | $limit | $(( $(date +%s) - t0 )) | $result | $file |")
  return $rc
}

skip() {  # skip PART WHY
  rows+=("| $1 | | | | not run: $2 | |")
  missing+=("$1: not run ($2)")
}

install() {
  if [ "$fake" = 1 ]; then  # the install is the GPU machine's; here only what it must leave importable
    "$PYTHON" -c 'import fairseq, posnet_fairseq; print("fake device: install not run; fairseq and posnet_fairseq import")'
    return
  fi
  ls "$wheels"/*.whl || { echo "no wheels in $wheels (make them with tests/gpu-wheels.sh)"; return 1; }
  "$PYTHON" -m pip install --disable-pip-version-check --no-index --no-deps "$wheels"/*.whl || return 1
  # The package itself is imported from the working tree (PYTHONPATH below): an editable install would
  # need setuptools to fetch build requirements, and the machine has no network (seen on the H100 run).
  "$PYTHON" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE "^(torch|fairseq-fixed|ctranslate2|numpy) "
  "$PYTHON" -c 'import fairseq, posnet_fairseq; print("fairseq", fairseq.__version__, "and posnet_fairseq import")'
}

describe() {
  "$PYTHON" -c 'import torch, sys
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none (fake device: CPU)"
print(f"device: {gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, Python {sys.version.split()[0]}")'
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
}

# Why CTranslate2 cannot decode on this GPU (status 0), or nothing (status 1). Checked on a real device, or
# where POSNET_CT2_LIBRARY is given (the test): its engine loads the CUDA library only at the first
# translation, so without this check the part would spend its limit on fairseq before failing.
ctranslate2_unloadable() {
  [ "$fake" = 1 ] && [ -z "${POSNET_CT2_LIBRARY:-}" ] && return 1
  local library=${POSNET_CT2_LIBRARY:-libcublas.so.12}
  "$PYTHON" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$library" 2>/dev/null && return 1
  echo "CTranslate2's CUDA build needs $library, which does not load here"
}

export -f install describe
export PYTHON fake wheels
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
bench=("$PYTHON" -W ignore -m posnet_fairseq.benchmark)
if run install "${POSNET_LIMIT_INSTALL:-45}" install.log install; then
  run device 30 device.txt describe
  run opcounts "${POSNET_LIMIT_OPCOUNTS:-75}" op_counts.md "${bench[@]}.op_counts" --device "$device" \
    --archs "$ops_archs" "${ops_args[@]}"
  run decode "${POSNET_LIMIT_DECODE:-220}" decode_speed_batch128.md "${bench[@]}.decode_speed" --device "$device" \
    --archs "$decode_archs" --workdir "$work/decode" "${decode_args[@]}"
  run train "${POSNET_LIMIT_TRAIN:-240}" train_speed.md "${bench[@]}.train_speed" --device "$device" \
    --archs "$train_archs" "${train_args[@]}"
  if why=$(ctranslate2_unloadable); then
    skip ctranslate2 "$why"
  else
    run ctranslate2 "${POSNET_LIMIT_CTRANSLATE2:-45}" decode_speed_ctranslate2.md "${bench[@]}.decode_speed" \
      --device "$device" --archs transformer --ctranslate2 --workdir "$work/ctranslate2" "${ct2_args[@]}"
  fi
else
  for part in device opcounts decode train ctranslate2; do skip "$part" "the install failed"; done
fi
rm -rf "$work"

{
  echo "# GPU run $(date -u +%Y-%m-%dT%H:%MZ), $slug"
  echo
  echo "tests/gpu-measure.sh, code of commit ${POSNET_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo 'unknown (no git; set POSNET_COMMIT)')}, \
$(( $(date +%s) - started )) s in all. Each part ran under its own limit; seconds are wall time."
  echo
  echo "| part | command | limit s | took s | result | output |"
  echo "|---|---|---:|---:|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  if [ ${#missing[@]} -eq 0 ]; then
    echo "Every part finished: nothing was left unmeasured."
  else
    echo "Not measured:"
    printf -- '- %s\n' "${missing[@]}"
  fi
} > "$summary"
cat "$summary"
if [ -n "${OUT:-}" ]; then
  tar -czf "$OUT/gpu-run.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")" && cp "$summary" "$OUT/summary.md"
fi
exit $status
