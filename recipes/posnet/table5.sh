#!/usr/bin/env bash
# PosNet paper, Table 5: from AppTek's light convolution to rPosNet, one step at a time:
# light convolution (window +-16, softmax over the window) -> + GeLU gating -> + global
# context -> rPosNet. Base models on WMT14 En-De (an assumption: the notes do not name the
# dataset); hyperparameters as Table 2 (base).
# The AppTek light convolution (anchors-impl.md 1.8 and L2) is a mixer of its own, not
# fairseq's LightConv; the rows name the architectures it would register.
#
#   bash recipes/posnet/table5.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table5 "$@"
BASELINE=lightconv
DS=wmt14_en_de
OPT=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007
     --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
     --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 150000 --max-tokens 4500
     --max-source-positions 128 --max-target-positions 128 --save-interval-updates 1000
     --keep-interval-updates 21 --no-epoch-checkpoints --seed 1)
TOKENS=27000; AVG="best 7"
GEN=(--beam 12 --lenpen 1.0)
row lightconv        $DS --arch lightconv_apptek_transformer_base "${OPT[@]}"
row lightconv_gated  $DS --arch lightconv_apptek_transformer_base --encoder-self-gating on --decoder-self-gating on "${OPT[@]}"
row lightconv_global $DS --arch lightconv_apptek_global_transformer_base --encoder-self-gating on --decoder-self-gating on "${OPT[@]}"
row rposnet          $DS --arch rposnet_transformer_base "${OPT[@]}"
run_table
