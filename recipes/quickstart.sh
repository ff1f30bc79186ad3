#!/usr/bin/env bash
# Quick start on the embedded synthetic corpus, CPU only (about 10 minutes on 2 cores):
#   generate corpus -> SentencePiece -> fairseq-preprocess -> fairseq-train (each
#   model, same budget) -> average the last checkpoints -> fairseq-generate with
#   beam search -> sacreBLEU, and a results table.
#
# Environment knobs:
#   POSNET_RUN_DIR            output directory (default: runs/quickstart in the checkout)
#   POSNET_QUICKSTART_ARCHS   architectures to compare (default: Transformer and rPosNet, tiny)
#   POSNET_QUICKSTART_EPOCHS  training epochs per model (default 5)
#   POSNET_QUICKSTART_JOBS    models trained at once, one core each (default: the number of cores)
#   POSNET_QUICKSTART_MICRO=1 a seconds-long run on a tiny corpus (used by the tests)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/setup.sh"
export PATH="$repo/.venv/bin:$PATH"
# One thread: these models are too small to gain from a second one, and on a
# busy machine two threads per process slow CPU training tenfold.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

run=${POSNET_RUN_DIR:-$repo/runs/quickstart}
archs=${POSNET_QUICKSTART_ARCHS:-"posnet_transformer_tiny rposnet_transformer_tiny"}
if [ "${POSNET_QUICKSTART_MICRO:-0}" = 1 ]; then
  train_pairs=300 epochs=${POSNET_QUICKSTART_EPOCHS:-3} vocab=200
else
  train_pairs=20000 epochs=${POSNET_QUICKSTART_EPOCHS:-5} vocab=1000
fi
plugin="$repo/posnet_fairseq"
mkdir -p "$run"
cd "$run"

echo "== 1. synthetic corpus ($train_pairs training pairs)"
posnet-synth --out-dir raw --train "$train_pairs" --valid 300 --test 500 --seed 1

echo "== 2. SentencePiece (joint, $vocab pieces)"
posnet-spm train --input raw/train.src raw/train.tgt --model-prefix spm --vocab-size "$vocab"
mkdir -p spm_text
for split in train valid test; do
  for lang in src tgt; do
    posnet-spm encode --model spm.model < "raw/$split.$lang" > "spm_text/$split.$lang"
  done
done

echo "== 3. fairseq-preprocess"
rm -rf data-bin
fairseq-preprocess --source-lang src --target-lang tgt --joined-dictionary --workers 2 \
  --trainpref spm_text/train --validpref spm_text/valid --testpref spm_text/test \
  --destdir data-bin > preprocess.log 2>&1

mkdir -p checkpoints gen
train() {  # one model; its log is checkpoints/ARCH.train.log
  local arch=$1
  rm -rf "checkpoints/$arch"
  fairseq-train data-bin --user-dir "$plugin" --arch "$arch" \
    --optimizer adam --adam-betas '(0.9, 0.98)' --lr 0.002 --lr-scheduler inverse_sqrt --warmup-updates 200 \
    --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --dropout 0.1 \
    --max-tokens 2048 --max-epoch "$epochs" --seed 1 --num-workers 0 \
    --save-dir "checkpoints/$arch" --keep-last-epochs 3 --no-last-checkpoints \
    --log-format simple --log-interval 100 > "checkpoints/$arch.train.log" 2>&1 \
    || { echo "fairseq-train $arch failed:"; tail -n 20 "checkpoints/$arch.train.log"; return 1; }
}

# The models train side by side, one core each (same budget: $epochs epochs);
# decoding then runs one model at a time so that sentences/s are comparable.
# (getconf, not nproc: nproc honours the OMP_NUM_THREADS=1 set above.)
jobs_max=${POSNET_QUICKSTART_JOBS:-$(getconf _NPROCESSORS_ONLN)}
pids=()
for arch in $archs; do
  echo "== 4. fairseq-train $arch ($epochs epochs)"
  train "$arch" & pids+=($!)
  if [ ${#pids[@]} -ge "$jobs_max" ]; then
    for pid in "${pids[@]}"; do wait "$pid"; done
    pids=()
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

results=results.tsv
printf "model\tparams\tBLEU\tchrF\tsentences/s\n" > "$results"
for arch in $archs; do
  params=$(sed -n 's/.*num\. shared model params: \([0-9,]*\).*/\1/p' "checkpoints/$arch.train.log" | head -n 1)

  echo "== 5. $arch: average the last 3 epoch checkpoints"
  posnet-average-checkpoints --inputs "checkpoints/$arch" --num-epoch-checkpoints 3 \
    --output "checkpoints/$arch/checkpoint_avg.pt"

  echo "== 6. $arch: fairseq-generate (beam 5) and sacreBLEU"
  # --required-batch-size-multiple 1: fairseq main drops a last batch whose size
  # is not a multiple of it (default 8), i.e. up to 7 test sentences.
  fairseq-generate data-bin --user-dir "$plugin" --path "checkpoints/$arch/checkpoint_avg.pt" \
    --gen-subset test --beam 5 --batch-size 64 --remove-bpe sentencepiece --num-workers 0 \
    --required-batch-size-multiple 1 \
    > "gen/$arch.out" 2> "gen/$arch.log"
  grep '^H-' "gen/$arch.out" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "gen/$arch.hyp"
  # --force: the synthetic corpus is space-separated by design (the final "." is a token).
  # With two metrics and -b, sacrebleu prints a list: [BLEU, chrF].
  read -r bleu chrf <<< "$(sacrebleu raw/test.tgt -i "gen/$arch.hyp" -m bleu chrf -b -w 1 --force | tr -d '[],' | xargs)"
  speed=$(sed -n 's/.*Translated .* (\([0-9.]*\) sentences\/s.*/\1/p' "gen/$arch.log")
  printf "%s\t%s\t%s\t%s\t%s\n" "$arch" "$params" "$bleu" "$chrf" "$speed" >> "$results"
done

echo
echo "Results on the synthetic test set (500 sentences; sacreBLEU 13a, chrF; $epochs epochs per model):"
column -t -s $'\t' "$results"
