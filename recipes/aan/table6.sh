#!/usr/bin/env bash
# AAN+ paper, Table 6: combinations of patterns (their averages are pooled, --aan-patterns),
# base models on WMT14 En-De, training and decoding as Table 2 (300k updates of ~25k tokens,
# Adam (0.9, 0.98), 4000 warm-up, lr 7e-4, dropout 0.1, label smoothing 0.1, last 5 checkpoints
# 5000 updates apart averaged, beam 4, lenpen 0.6).
#
#   bash recipes/aan/table6.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table6 "$@"
BASELINE=aan_plus_avg
DS=wmt14_en_de
OPT=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007
     --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
     --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
     --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6)
row aan_plus_avg $DS --arch aan_plus_avg "${OPT[@]}"
row ner_far      $DS --arch aan_plus_avg --aan-patterns ner,far "${OPT[@]}"
row ner_wet      $DS --arch aan_plus_avg --aan-patterns ner,wet "${OPT[@]}"
row far_wet      $DS --arch aan_plus_avg --aan-patterns far,wet "${OPT[@]}"
row ner_far_wet  $DS --arch aan_plus_avg --aan-patterns ner,far,wet "${OPT[@]}"
row all          $DS --arch aan_plus_avg --aan-patterns avg,ner,far,wet "${OPT[@]}"
run_table
