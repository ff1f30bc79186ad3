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
source "$(dirname "$0")/settings.sh"
BASE_ARCH=posnet_transformer_base
aan_rows $DS _deep --lr 0.0007 --dropout 0.1 --encoder-layers 12 --decoder-layers 12 "${COMMON[@]}"
BASE_ARCH=posnet_transformer_big
aan_rows $DS _big --lr 0.0005 --dropout 0.3 "${COMMON[@]}"
run_table
