#!/usr/bin/env bash
# PosNet paper, Table 3: big models on WMT14 En-De and small models on IWSLT14 De-En.
#
# Big (WMT14 En-De): 300k updates of ~27k tokens (the notes give no big batch size: as base),
#   Adam (0.9, 0.98), inverse-sqrt, 4000 warm-up, lr 5e-4 (fairseq's big setting), dropout 0.3,
#   label smoothing 0.1, lengths <= 128; a checkpoint every 600 updates, the 20 around the best
#   validation perplexity averaged; rPosNet/Shaw use K = 8 (their _big presets).
# Small (IWSLT14 De-En): 30k updates of ~16k tokens, lr 5e-4, dropout 0.3, weight decay 1e-4,
#   label smoothing 0.1; a checkpoint every 300 updates, the 30 around the best averaged.
# Both: beam 12, length normalisation (lenpen 1).
#
#   bash recipes/posnet/table3.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table3 "$@"
BASELINES=transformer
GEN=(--beam 12 --lenpen 1.0 --batch-size 64)
COMMON=(--optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr-scheduler inverse_sqrt
        --warmup-updates 4000 --warmup-init-lr 1e-07 --criterion label_smoothed_cross_entropy
        --label-smoothing 0.1 --max-source-positions 128 --max-target-positions 128 --no-epoch-checkpoints --seed 1)

BIG=(--share-all-embeddings --lr 0.0005 --dropout 0.3 --max-update 300000 --max-tokens 3500
     --save-interval-updates 600 --keep-interval-updates 60 "${COMMON[@]}")
TOKENS=27000; AVG="best 20"
row transformer wmt14_en_de --arch posnet_transformer_big "${BIG[@]}"
row shaw        wmt14_en_de --arch shaw_transformer_big "${BIG[@]}"
row relattn     wmt14_en_de --arch relattn_transformer_big "${BIG[@]}"
row aposnet     wmt14_en_de --arch aposnet_transformer_big "${BIG[@]}"
row rposnet     wmt14_en_de --arch rposnet_transformer_big "${BIG[@]}"

SMALL=(--share-decoder-input-output-embed --lr 0.0005 --dropout 0.3 --weight-decay 0.0001 --max-update 30000
       --max-tokens 4096 --save-interval-updates 300 --keep-interval-updates 90 "${COMMON[@]}")
TOKENS=16000; AVG="best 30"
row transformer iwslt14_de_en --arch posnet_transformer_small "${SMALL[@]}"
row shaw        iwslt14_de_en --arch shaw_transformer_small "${SMALL[@]}"
row relattn     iwslt14_de_en --arch relattn_transformer_small "${SMALL[@]}"
row aposnet     iwslt14_de_en --arch aposnet_transformer_small "${SMALL[@]}"
row rposnet     iwslt14_de_en --arch rposnet_transformer_small "${SMALL[@]}"
run_table
