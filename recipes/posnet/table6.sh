#!/usr/bin/env bash
# PosNet paper, Table 6 (appendix D, Figure 2): each attention with (✓) and without (✗) the
# GeLU gating of Eq. 4, base models on WMT14 En->De (newstest2014); parameters, BLEU, BLEURT,
# COMET. Rows: Transformer, Shaw et al. (2018), Rel. Self-Attention (content queries x
# relative keys), aPosNet, rPosNet, each ✗ and ✓. The paper marks no significance in this table.
# Settings: posnet_fairseq/table_runs/posnet.py (base).
#
#   bash recipes/posnet/table6.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table6 "$@"
run_table
