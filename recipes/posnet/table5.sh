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
BASELINES=lightconv
DS=wmt14_en_de
source "$(dirname "$0")/settings.sh"
OPT=(--share-all-embeddings "${BASE_OPT[@]}")
row lightconv        $DS --arch lightconv_apptek_transformer_base "${OPT[@]}"
row lightconv_gated  $DS --arch lightconv_apptek_transformer_base --encoder-self-gating on --decoder-self-gating on "${OPT[@]}"
row lightconv_global $DS --arch lightconv_apptek_global_transformer_base --encoder-self-gating on --decoder-self-gating on "${OPT[@]}"
row rposnet          $DS --arch rposnet_transformer_base "${OPT[@]}"
run_table
