#!/usr/bin/env bash
# AAN+ paper, Figure 9 (section 6.3.2): BLEU on WMT14 En->De (newstest2014) as the encoder gets
# shallower, for the Transformer and AAN+ with AVG, FAR, NER and WET in the decoder (6 decoder
# layers, base width). The paper plots BLEU relative to the 6-layer SAN baseline and says
# "decreasing the encoder depth to 1 costs ~0.65 extra BLEU on average"; its exact depths are
# not in the text: 1 to 6 encoder layers here (our choice; 6 is Table 2's setting).
# Columns: tokenized BLEU, METEOR. Settings: posnet_fairseq/table_runs/aan.py (base).
#
#   bash recipes/aan/figure9.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt14-en-de.sh --paper aan (32k merges: data/wmt14_en_de_bpe32k).
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-figure9 "$@"
run_table
