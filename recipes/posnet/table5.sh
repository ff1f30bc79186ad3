#!/usr/bin/env bash
# PosNet paper, Table 5: from LightConv to rPosNet one feature at a time, base models on WMT18
# En->Zh (newstest2017); parameters, BLEU, BLEURT, COMET. Rows: Light Convolution (AppTek's
# light convolution, no GLU), + GLU [LightConv] (Eq. 14), + GeLU Gating (the gating of Eq. 4
# instead of the GLU), + Global Context (distances beyond K share the border weights), rPosNet.
# Separate vocabularies, untied decoder embeddings (the paper's 101M/104M counts).
# The paper marks no significance in this table.
# Settings: posnet_fairseq/table_runs/posnet.py (base). Data: prepare-wmt18-en-zh.sh.
#
#   bash recipes/posnet/table5.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table5 "$@"
run_table
