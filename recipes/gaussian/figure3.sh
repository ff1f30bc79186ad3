#!/usr/bin/env bash
# Hard-coded Gaussian paper, Figure 3 (section 6.1): BLEU on WMT16 En->Ro (newstest2016) of BASE,
# BASE/-FF, HC-SA and HC-SA/-FF (no feed-forward sub-layers: --no-encoder-ffn --no-decoder-ffn)
# as a function of the number of layers (encoder and decoder alike), base width. The text gives
# the gaps at four layers (BASE - BASE/-FF 1.8, HC-SA - HC-SA/-FF 3.2); the figure's other
# depths are not in the text: 1 to 6 layers here (our choice). BLEU: sacreBLEU 'intl'.
# Settings: posnet_fairseq/table_runs/gaussian.py (wmt).
#
#   bash recipes/gaussian/figure3.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt16-en-ro.sh --paper gaussian (Romanian without diacritics, 32000 merges).
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-figure3 "$@"
run_table
