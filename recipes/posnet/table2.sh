#!/usr/bin/env bash
# PosNet paper (Schmidt & Di Gangi), Table 2: base models on WMT14 En->De, WMT14 En->Fr and
# WMT18 En->Zh (newstest2014, newstest2014, newstest2017). Rows: Transformer, Shaw et al.
# (2018), FourierNet, GaussianNet, LinearNet, LightConv (Eq. 14, with GLU), gLinearNet,
# aPosNet, rPosNet. Columns: parameters (En-De), BLEU (sacreBLEU: 13a, zh for Chinese),
# BLEURT-20 and COMET wmt20-comet-da (--bleurt-*/--comet-* options: separate environments),
# each marked against the Transformer (†) and Shaw et al. (‡) as the paper does.
# Settings: recipes/posnet/settings.sh (what the paper says, and what it does not).
#
#   bash recipes/posnet/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--datasets a,b] ...
# Data: recipes/data/prepare-wmt14-en-de.sh (--paper posnet), prepare-wmt14-en-fr.sh,
# prepare-wmt18-en-zh.sh, into --data-root.
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table2 "$@"
source "$(dirname "$0")/settings.sh"
BASELINES="transformer shaw"
posnet_size base
for ds in wmt14_en_de_bpe44k wmt14_en_fr_bpe40k wmt18_en_zh; do
  posnet_embeddings "$ds"
  for name in "${POSNET_ROWS[@]}"; do
    posnet_model "$name"
    row "$name" "$ds" "${MODEL[@]}" "${EMB[@]+"${EMB[@]}"}" "${OPT[@]}"
  done
done
run_table
