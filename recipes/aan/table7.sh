#!/usr/bin/env bash
# AAN+ paper, Table 7: base models on WMT14 En-Fr, trained and decoded as Table 2 (300k
# updates of ~25k tokens, Adam (0.9, 0.98), 4000 warm-up, lr 7e-4, dropout 0.1, label smoothing
# 0.1, last 5 checkpoints 5000 updates apart averaged, beam 4, lenpen 0.6).
#
#   bash recipes/aan/table7.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table7 "$@"
BASELINES=transformer
DS=wmt14_en_fr
source "$(dirname "$0")/settings.sh"
BASE_ARCH=posnet_transformer_base
aan_rows $DS "" "${BASE_OPT[@]}"
run_table
