#!/usr/bin/env bash
# AAN+ paper, Figure 8 (section 6.3.1): BLEU as a function of alpha (NER, exp(alpha k)), beta (FAR,
# exp(-beta k)) and gamma (WET, exp(gamma U z_k)), each from 0.1 to 0.5 in steps of 0.1, base
# models on WMT14 En->De, each trained for 100K updates (the paper's). The paper reports no
# NER result for alpha = 0.4 and 0.5 (NaN in training): those rows run here too and may fail
# the same way. The paper scores the dev set newstest2013; the data recipe's valid split is
# held-out training pairs, so this scores newstest2014 (test): compare the curve's shape.
# Columns: tokenized BLEU, METEOR. Settings: posnet_fairseq/table_runs/aan.py (base, 100k updates).
#
#   bash recipes/aan/figure8.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt14-en-de.sh --paper aan (32k merges: data/wmt14_en_de_bpe32k).
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-figure8 "$@"
run_table
