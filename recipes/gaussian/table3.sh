#!/usr/bin/env bash
# Hard-coded Gaussian paper, Table 3 (section 5): decoding speed and memory on WMT16 En->Ro
# (newstest2016) at the base size ("the larger architecture"). Rows: BASE, HC-SA, SH-X, BASE/-SA
# and SH-X/-SA (no self-attention sub-layers at all). Columns: BLEU (sacreBLEU 'intl') and
# sentences per second, decoded in batches of 256 (the paper: the mean of five runs on one
# RTX 2080 Ti; here fairseq-generate's own timing of one run, on whatever GPU runs the row).
# The paper's tokens/batch column (the largest batch one GPU fits in training) is a memory
# benchmark, not a training run: see the table's note.
# Settings: posnet_fairseq/table_runs/gaussian.py (wmt).
#
#   bash recipes/gaussian/table3.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt16-en-ro.sh --paper gaussian (Romanian without diacritics, 32000 merges).
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-table3 "$@"
run_table
