#!/usr/bin/env bash
# AAN+ paper, Table 4: deep (12 encoder + 12 decoder layers, base width) and big (d = 1024, 16
# heads, FFN 4096) models on WMT14 En->De (newstest2014). Rows per setting: Transformer, SSRU,
# Linear Attention, AAN+ with AVG, FAR, NER, WET. Columns: parameters, decoding speed relative
# to the Transformer of the same setting, tokenized BLEU, METEOR.
# Big: 16k warm-up updates, Adam beta2 0.998 (the paper's). Deep: depth-scaled initialization
# (--ds-init, the paper's section 6.3.6; Zhang et al., 2019). Settings: posnet_fairseq/table_runs/aan.py.
#
#   bash recipes/aan/table4.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt14-en-de.sh --paper aan (32k merges: data/wmt14_en_de_bpe32k).
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table4 "$@"
run_table
