#!/usr/bin/env bash
# Hard-coded Gaussian paper, Figure 7 (section 6.3): where to add learned cross-attention heads
# to SH-X. WMT16 En->Ro (newstest2016) with "the smaller IWSLT En-De architecture" (footnote
# 19: 288 / 507 / 4 heads / 5 layers). Rows: N learned cross heads all in the last decoder layer
# (--learned-cross-heads N), and one learned head in each of the last N layers
# (--learned-cross-layers), N = 1..4 (N = 1 is SH-X; the figure's range is not in the text, so
# N stops at the 4 heads of the IWSLT size: our choice). BLEU: sacreBLEU 'intl'. Schedule: the
# footnote names the architecture only; section 4.2 gives the larger datasets, WMT16 En-Ro among
# them, 4000 warm-up updates: peak 288^-0.5 x 4000^-0.5 = 9.3e-4 (the code's rule), label
# smoothing 0.1, ~25k target tokens per update.
# Settings: posnet_fairseq/table_runs/gaussian.py (IWSLT_ON_WMT).
#
#   bash recipes/gaussian/figure7.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt16-en-ro.sh --paper gaussian.
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-figure7 "$@"
run_table
