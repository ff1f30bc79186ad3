#!/usr/bin/env bash
# AAN+ paper, Table 6: combinations of patterns (their averages are pooled, --aan-patterns),
# base models on WMT14 En-De, training and decoding as Table 2 (300k updates of ~25k tokens,
# Adam (0.9, 0.98), 4000 warm-up, lr 7e-4, dropout 0.1, label smoothing 0.1, last 5 checkpoints
# 5000 updates apart averaged, beam 4, lenpen 0.6).
#
#   bash recipes/aan/table6.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table6 "$@"
BASELINES=aan_plus_avg
DS=wmt14_en_de
source "$(dirname "$0")/settings.sh"
OPT=("${BASE_OPT[@]}")
row aan_plus_avg $DS --arch aan_plus_avg "${OPT[@]}"
row ner_far      $DS --arch aan_plus_avg --aan-patterns ner,far "${OPT[@]}"
row ner_wet      $DS --arch aan_plus_avg --aan-patterns ner,wet "${OPT[@]}"
row far_wet      $DS --arch aan_plus_avg --aan-patterns far,wet "${OPT[@]}"
row ner_far_wet  $DS --arch aan_plus_avg --aan-patterns ner,far,wet "${OPT[@]}"
row all          $DS --arch aan_plus_avg --aan-patterns avg,ner,far,wet "${OPT[@]}"
run_table
