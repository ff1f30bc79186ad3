#!/usr/bin/env bash
# AAN+ paper, Table 4: deeper (12 encoder + 12 decoder layers) and bigger models on WMT14 En-De.
# Training as Table 2 (300k updates of ~25k tokens, Adam (0.9, 0.98), 4000 warm-up, label
# smoothing 0.1, the last 5 of checkpoints 5000 updates apart averaged, beam 4, lenpen 0.6);
# deep: lr 7e-4, dropout 0.1; big: lr 5e-4, dropout 0.3 (fairseq's big settings: not in the notes).
#
#   bash recipes/aan/table4.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table4 "$@"
DS=wmt14_en_de
COMMON=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0
        --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07
        --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
        --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6)
DEEP=(--lr 0.0007 --dropout 0.1 "${COMMON[@]}")
BIG=(--lr 0.0005 --dropout 0.3 "${COMMON[@]}")
row transformer_deep  $DS --arch posnet_transformer_base --encoder-layers 12 --decoder-layers 12 "${DEEP[@]}"
row aan_deep          $DS --arch aan_deep "${DEEP[@]}"
row aan_plus_avg_deep $DS --arch aan_plus_avg_deep "${DEEP[@]}"
row aan_plus_ner_deep $DS --arch aan_plus_ner_deep "${DEEP[@]}"
row aan_plus_far_deep $DS --arch aan_plus_far_deep "${DEEP[@]}"
row aan_plus_wet_deep $DS --arch aan_plus_wet_deep "${DEEP[@]}"
row transformer_big   $DS --arch posnet_transformer_big "${BIG[@]}"
row aan_big           $DS --arch aan_big "${BIG[@]}"
row aan_plus_avg_big  $DS --arch aan_plus_avg_big "${BIG[@]}"
row aan_plus_ner_big  $DS --arch aan_plus_ner_big "${BIG[@]}"
row aan_plus_far_big  $DS --arch aan_plus_far_big "${BIG[@]}"
row aan_plus_wet_big  $DS --arch aan_plus_wet_big "${BIG[@]}"
run_table
