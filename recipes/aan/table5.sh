#!/usr/bin/env bash
# AAN+ paper, Table 5: alternatives to exp() for the NER and WET scores, base models on WMT14
# En->De (newstest2014). Rows: Transformer; exp, Relu and Square, each with AAN+ w/ NER and
# AAN+ w/ WET; the WET rows with Relu and Square (marked † in the paper) train with gradient
# norm clipping at 1.0, as the paper says. Columns: parameters, tokenized BLEU, METEOR.
# Settings: posnet_fairseq/table_runs/aan.py (base).
#
#   bash recipes/aan/table5.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table5 "$@"
run_table
