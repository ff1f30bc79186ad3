#!/usr/bin/env bash
# PosNet paper, Table 4: every combination of encoder self-attention, decoder self-attention
# and decoder cross-attention using multi-head attention (✗) or rPosNet (✓), base models on
# WMT14 En->De (newstest2014); BLEU, BLEURT, COMET. The ✗✗✗ row is the Transformer of Table 2
# (sinusoidal positions); every row with rPosNet uses the rPosNet preset (learned position
# embeddings, gated rPosNet where it is placed, multi-head attention elsewhere); rPosNet in
# cross-attention uses gamma = the training set's mean source / target length (Eq. 10).
# The paper marks no significance in this table, and gives no parameter counts.
# Settings: posnet_fairseq/table_runs/posnet.py (base).
#
#   bash recipes/posnet/table4.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table4 "$@"
run_table
