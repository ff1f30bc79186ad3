#!/usr/bin/env bash
# AAN+ paper (Zhang et al.), Table 2: base models on WMT14 En->De (newstest2014). Rows:
# Transformer, SSRU, Linear Attention, AAN+ with AVG, FAR (exp(-0.1 k)), NER (exp(0.1 k)) and
# WET (exp(0.1 U z_k)) in the decoder self-attention. Columns: parameters, training and
# decoding speed relative to the Transformer (fairseq's own timings; the paper: 0.2k updates of
# 25k tokens, and newstest2014 in batches of 32), tokenized BLEU, METEOR. The paper averages 5
# runs; one run per row here. Settings: posnet_fairseq/table_runs/aan.py (what the paper says, and not).
#
#   bash recipes/aan/table2.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt14-en-de.sh --paper aan (32k merges: data/wmt14_en_de_bpe32k).
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table2 "$@"
run_table
