#!/usr/bin/env bash
# AAN+ paper, Table 6: combinations of patterns (--aan-patterns), base models on WMT14 En->De
# (newstest2014). Each pattern's weighted average (Eq. 4) is computed, the averages are
# mean-pooled, and one gate (Eq. 5) follows: the paper's text average-pools the patterns'
# outputs, but its parameter counts (FAR + NER has AVG's 72.30M) leave room for one gate only. Rows, as the paper's ✓ columns
# AVG/FAR/NER/WET: Transformer; AVG; FAR; NER; WET; FAR+NER; AVG+NER; NER+WET; FAR+NER+WET;
# AVG+FAR+NER; AVG+FAR+NER+WET. Columns: parameters, decoding speed relative to the
# Transformer, tokenized BLEU, METEOR. The table and the text disagree on which two rows give
# 27.71 and 27.77 BLEU (the text names WET+NER first); the parameter column (WET adds 1.58M)
# settles it as the table prints it: FAR+NER 27.71, NER+WET 27.77.
# Settings: posnet_fairseq/table_runs/aan.py (base).
#
#   bash recipes/aan/table6.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table6 "$@"
run_table
