#!/usr/bin/env bash
# TISA (Wennberg & Henter) in machine translation - our experiment: the paper evaluated on
# GLUE. Translation-invariant positional scoring (S = 5 kernels per head and layer) in the
# encoder and decoder self-attention: (a) beside the sinusoidal position embeddings, (b)
# instead of them, and S = 0 (no position information at all, bag of words up to the causal
# decoder mask), against the Transformer.
#
# The TISA paper has no translation table: everything here is our choice, said here. Base on
# WMT14 En->De and small on IWSLT14 De->En, trained and scored as the PosNet paper's Tables 2
# and 3 (posnet_fairseq/table_runs/posnet.py: base 150k updates of ~27k tokens, small = the *_small
# presets, base with FFN 1024 and dropout 0.3, 30k updates of ~16k tokens; best-and-following checkpoint averaging;
# beam 12); S = 5 kernels per head and layer (the paper's best GLUE setting) with the
# reference code's random initialisation (the paper initialises from a pretrained ALBERT,
# which a translation model from scratch does not have). Marks: † against the Transformer.
#
#   bash recipes/tisa/mt.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init tisa-mt "$@"
run_table
