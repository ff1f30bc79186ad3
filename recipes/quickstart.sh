#!/usr/bin/env bash
# Quick start on the embedded synthetic corpus, CPU only (about 10 minutes on 2 cores): one call of
# posnet-compare (docs/compare.md) with the Transformer and rPosNet, tiny, 5 epochs each:
#   synthetic corpus -> SentencePiece -> fairseq-preprocess -> fairseq-train (side by side, one
#   core each, same budget) -> average the last 3 epoch checkpoints -> fairseq-generate (beam 5)
#   -> sacreBLEU with confidence intervals, BLEU by sentence length, cost ratios -> results table.
#
# Environment knobs:
#   POSNET_RUN_DIR            output directory (default: runs/quickstart in the checkout)
#   POSNET_QUICKSTART_ARCHS   architectures to compare (default: Transformer and rPosNet, tiny)
#   POSNET_QUICKSTART_EPOCHS  training epochs per model (default 5)
#   POSNET_QUICKSTART_JOBS    models trained at once, one core each (default: the number of cores)
#   POSNET_QUICKSTART_MICRO=1 a seconds-long run on a tiny corpus (used by the tests)
# Re-running resumes: finished models are skipped, an interrupted training continues.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/setup.sh"
export PATH="$repo/.venv/bin:$PATH"
# One thread: these models are too small to gain from a second one, and on a
# busy machine two threads per process slow CPU training tenfold.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

archs=${POSNET_QUICKSTART_ARCHS:-"posnet_transformer_tiny rposnet_transformer_tiny"}
if [ "${POSNET_QUICKSTART_MICRO:-0}" = 1 ]; then
  epochs=${POSNET_QUICKSTART_EPOCHS:-3}
  micro=(--train-pairs 300 --valid 50 --test 50 --vocab-size 200 --interval 10
         --decode-lengths 30 --decode-sentences 8 --decode-rounds 1 --step-rounds 1 --timed-steps 1
         --bootstrap-samples 100)
else
  epochs=${POSNET_QUICKSTART_EPOCHS:-5}
  micro=()
fi
# (getconf, not nproc: nproc honours the OMP_NUM_THREADS=1 set above.)
posnet-compare --archs "$(echo $archs | tr ' ' ',')" --budget "${epochs}e" \
  --jobs "${POSNET_QUICKSTART_JOBS:-$(getconf _NPROCESSORS_ONLN)}" \
  --out "${POSNET_RUN_DIR:-$repo/runs/quickstart}" "${micro[@]}"
