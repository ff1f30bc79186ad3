#!/usr/bin/env bash
# TISA (Wennberg & Henter) in machine translation - our experiment: the paper evaluated on
# GLUE. Translation-invariant positional scoring (S = 5 kernels per head and layer) in the
# encoder and decoder self-attention: (a) beside the sinusoidal position embeddings, (b)
# instead of them, and S = 0 (no position information at all, bag of words up to the causal
# decoder mask), against the Transformer.
#
# Base on WMT14 En-De as the PosNet paper's base setting (150k updates of ~27k tokens, Adam
# (0.9, 0.98), 4000 warm-up, lr 7e-4, dropout 0.1, label smoothing 0.1, 7 checkpoints every
# 1000 updates around the best averaged, beam 12, lenpen 1); small on IWSLT14 De-En as its
# small setting (30k updates of ~16k tokens, lr 5e-4, dropout 0.3, weight decay 1e-4, 30
# checkpoints every 300 updates around the best averaged).
#
#   bash recipes/tisa/mt.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init tisa-mt "$@"
BASELINES=transformer
COMMON=(--optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr-scheduler inverse_sqrt
        --warmup-updates 4000 --warmup-init-lr 1e-07 --criterion label_smoothed_cross_entropy
        --label-smoothing 0.1 --max-source-positions 128 --max-target-positions 128 --no-epoch-checkpoints --seed 1)
GEN=(--beam 12 --lenpen 1.0 --batch-size 64)

BASE=(--share-all-embeddings --lr 0.0007 --dropout 0.1 --max-update 150000 --max-tokens 4500
      --save-interval-updates 1000 --keep-interval-updates 21 "${COMMON[@]}")
TOKENS=27000; AVG="best 7"
row transformer wmt14_en_de --arch posnet_transformer_base "${BASE[@]}"
row tisa_a      wmt14_en_de --arch tisa_transformer_base --tisa-kernels 5 "${BASE[@]}"
row tisa_b      wmt14_en_de --arch tisa_nope_transformer_base --tisa-kernels 5 "${BASE[@]}"
row tisa_s0     wmt14_en_de --arch tisa_nope_transformer_base --tisa-kernels 0 "${BASE[@]}"

SMALL=(--share-decoder-input-output-embed --lr 0.0005 --dropout 0.3 --weight-decay 0.0001 --max-update 30000
       --max-tokens 4096 --save-interval-updates 300 --keep-interval-updates 90 "${COMMON[@]}")
TOKENS=16000; AVG="best 30"
row transformer iwslt14_de_en --arch posnet_transformer_small "${SMALL[@]}"
row tisa_a      iwslt14_de_en --arch tisa_transformer_small --tisa-kernels 5 "${SMALL[@]}"
row tisa_b      iwslt14_de_en --arch tisa_nope_transformer_small --tisa-kernels 5 "${SMALL[@]}"
row tisa_s0     iwslt14_de_en --arch tisa_nope_transformer_small --tisa-kernels 0 "${SMALL[@]}"
run_table
