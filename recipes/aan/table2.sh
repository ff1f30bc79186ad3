#!/usr/bin/env bash
# AAN+ paper (Zhang et al.), Table 2: base models on WMT14 En-De - the Transformer, the 2018
# AAN (with its FFN) and AAN+ with each pattern (AVG, NER exp(0.1 k), FAR exp(-0.1 k),
# WET exp(0.1 U z_k)) in the decoder self-attention.
#
# 300k updates of ~25k tokens (--max-tokens 4096 per GPU, --update-freq from the world size),
# Adam (0.9, 0.98), inverse-sqrt schedule with 4000 warm-up updates, lr 7e-4 (not in the notes:
# fairseq's base setting), dropout 0.1, label smoothing 0.1, post-norm layers (fairseq default,
# as the paper's Eq. 17). A checkpoint every 5000 updates; the last 5 are averaged. Beam 4,
# length penalty 0.6. Data: prepare-wmt14-en-de.sh --paper aan (32k BPE merges).
#
#   bash recipes/aan/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table2 "$@"
BASELINE=transformer
DS=wmt14_en_de
OPT=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007
     --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
     --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
     --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6)
row transformer  $DS --arch posnet_transformer_base "${OPT[@]}"
row aan          $DS --arch aan "${OPT[@]}"
row aan_plus_avg $DS --arch aan_plus_avg "${OPT[@]}"
row aan_plus_ner $DS --arch aan_plus_ner "${OPT[@]}"
row aan_plus_far $DS --arch aan_plus_far "${OPT[@]}"
row aan_plus_wet $DS --arch aan_plus_wet "${OPT[@]}"
run_table
