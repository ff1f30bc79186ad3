#!/usr/bin/env bash
# AAN+ paper, Table 7: base models on WMT14 En->Fr (newstest2014), rows and columns as Table 2:
# Transformer, SSRU, Linear Attention, AAN+ with AVG, FAR, NER, WET; parameters, training and
# decoding speed relative to the Transformer, tokenized BLEU, METEOR. The paper's development
# set is newstest2012+2013; the data recipe holds out training pairs instead.
# Settings: posnet_fairseq/table_runs/aan.py (base).
#
#   bash recipes/aan/table7.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt14-en-fr.sh --paper aan (32k merges: data/wmt14_en_fr_bpe32k).
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table7 "$@"
run_table
