#!/usr/bin/env bash
# Hard-coded Gaussian paper (You, Sun & Iyyer), Table 2: BASE (Transformer), HC-SA (fixed
# Gaussian self-attention, encoder offsets -1/+1, decoder -1/0), HC-ALL (+ hard-coded cross
# attention centred at gamma * i), SH-X (HC-SA with one learned cross head in the last decoder
# layer only) on the WMT sets shared with the other papers and on IWSLT14 De-En with the
# paper's IWSLT model size (288 / 507 / 4 heads / 5 layers).
#
# WMT (base): ~25k tokens per update, Adam (0.9, 0.98), inverse-sqrt with 4000 warm-up, lr
#   7e-4, dropout 0.1, label smoothing 0.1, 100k updates (the update count and lr are not in the
#   notes: fairseq's base settings); last 5 checkpoints (every 1000 updates) averaged; beam 4,
#   lenpen 0.6.
# IWSLT: lr 3e-4 decaying linearly to 0 after 4000 warm-up updates, no label smoothing (the
#   paper's README), dropout 0.3, ~16k tokens, 30k updates; last 5 checkpoints averaged; beam 5.
# gamma (the cross-attention length ratio) is computed from the training data by the model.
#
#   bash recipes/gaussian/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-table2 "$@"
BASELINES=base
WMT=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007
     --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
     --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 100000 --max-tokens 4096
     --save-interval-updates 1000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6 --batch-size 64)
for ds in wmt14_en_de wmt14_en_fr; do
  row base   "$ds" --arch posnet_transformer_base "${WMT[@]}"
  row hc_sa  "$ds" --arch hc_gaussian "${WMT[@]}"
  row hc_all "$ds" --arch hc_gaussian_all "${WMT[@]}"
  row sh_x   "$ds" --arch hc_gaussian_shx "${WMT[@]}"
done

IWSLT=(--share-decoder-input-output-embed --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0003
       --lr-scheduler polynomial_decay --total-num-update 30000 --end-learning-rate 0.0 --warmup-updates 4000
       --dropout 0.3 --criterion label_smoothed_cross_entropy --label-smoothing 0.0 --max-update 30000
       --max-tokens 4096 --save-interval-updates 1000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=16000; AVG="last 5"
GEN=(--beam 5 --lenpen 1.0 --batch-size 64)
SIZE=(--encoder-embed-dim 288 --decoder-embed-dim 288 --encoder-ffn-embed-dim 507 --decoder-ffn-embed-dim 507
      --encoder-attention-heads 4 --decoder-attention-heads 4 --encoder-layers 5 --decoder-layers 5)
row base   iwslt14_de_en --arch posnet_transformer_small "${SIZE[@]}" "${IWSLT[@]}"
row hc_sa  iwslt14_de_en --arch hc_gaussian_iwslt "${IWSLT[@]}"
row hc_all iwslt14_de_en --arch hc_gaussian_all_iwslt "${IWSLT[@]}"
row sh_x   iwslt14_de_en --arch hc_gaussian_shx_iwslt "${IWSLT[@]}"
run_table
