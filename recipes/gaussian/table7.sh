#!/usr/bin/env bash
# Hard-coded Gaussian paper, Table 7 (appendix B): decoding speed and memory at the IWSLT size
# (288 / 507 / 4 heads / 5 layers). The paper's IWSLT16 En->De has no data recipe here; IWSLT14
# De->En is our stand-in (its column is ours, the paper's columns hold its figures). Rows:
# BASE, HC-SA, SH-X, BASE/-SA, SH-X/-SA. Columns: BLEU (sacreBLEU 'intl') and sentences per
# second (fairseq-generate's timing, batches of 256 as the paper's Table 3; the paper decodes
# the dev set). Tokens/batch (a memory benchmark): the table's note.
# Settings: posnet_fairseq/table_runs/gaussian.py (iwslt).
#
#   bash recipes/gaussian/table7.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-iwslt14.sh.
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-table7 "$@"
run_table
