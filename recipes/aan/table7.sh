#!/usr/bin/env bash
# AAN+ paper, Table 7: base models on WMT14 En-Fr, trained and decoded as Table 2 (300k
# updates of ~25k tokens, Adam (0.9, 0.98), 4000 warm-up, lr 7e-4, dropout 0.1, label smoothing
# 0.1, last 5 checkpoints 5000 updates apart averaged, beam 4, lenpen 0.6).
#
#   bash recipes/aan/table7.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table7 "$@"
BASELINE=transformer
DS=wmt14_en_fr
OPT=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007
     --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
     --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
     --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6)
row transformer  $DS --arch posnet_transformer_base "${OPT[@]}"
row aan          $DS --arch aan "${OPT[@]}"
row aan_plus_avg $DS --arch aan_plus_avg "${OPT[@]}"
row aan_plus_ner $DS --arch aan_plus_ner "${OPT[@]}"
row aan_plus_far $DS --arch aan_plus_far "${OPT[@]}"
row aan_plus_wet $DS --arch aan_plus_wet "${OPT[@]}"
run_table
