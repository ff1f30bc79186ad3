#!/usr/bin/env bash
# AAN+ paper (Zhang et al.), Table 2: base models on WMT14 En-De - the Transformer, the 2018
# AAN (with its FFN) and AAN+ with each pattern (AVG, NER exp(0.1 k), FAR exp(-0.1 k),
# WET exp(0.1 U z_k)) in the decoder self-attention.
# Settings in settings.sh (300k updates of ~25k tokens, lr 7e-4, dropout 0.1, last 5
# checkpoints 5000 updates apart averaged, beam 4, lenpen 0.6).
# Data: prepare-wmt14-en-de.sh --paper aan (32k BPE merges).
#
#   bash recipes/aan/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table2 "$@"
BASELINES=transformer
DS=wmt14_en_de
source "$(dirname "$0")/settings.sh"
BASE_ARCH=posnet_transformer_base
aan_rows $DS "" "${BASE_OPT[@]}"
run_table
