#!/usr/bin/env bash
# PosNet paper (Schmidt & Di Gangi), Table 2: base models on WMT14 En->De, WMT14 En->Fr and
# WMT18 En->Zh (newstest2014, newstest2014, newstest2017). Rows: Transformer, Shaw et al.
# (2018), FourierNet, GaussianNet, LinearNet, LightConv (Eq. 14, with GLU), gLinearNet,
# aPosNet, rPosNet. Columns: parameters (En-De), BLEU (sacreBLEU: 13a, zh for Chinese),
# BLEURT-20 and COMET wmt20-comet-da (--bleurt-*/--comet-* options: separate environments),
# each marked against the Transformer (†) and Shaw et al. (‡) as the paper does.
# Settings: posnet_fairseq/table_runs/posnet.py (what the paper says, and what it does not).
#
#   bash recipes/posnet/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--datasets a,b] ...
# Data: recipes/data/prepare-wmt14-en-de.sh (--paper posnet), prepare-wmt14-en-fr.sh,
# prepare-wmt18-en-zh.sh, into --data-root.
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table2 "$@"
run_table
