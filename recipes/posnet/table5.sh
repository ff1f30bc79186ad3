#!/usr/bin/env bash
# PosNet paper, Table 5: from LightConv to rPosNet one feature at a time, base models on WMT18
# En->Zh (newstest2017); parameters, BLEU, BLEURT, COMET. Rows: Light Convolution (AppTek's
# light convolution, no GLU), + GLU [LightConv] (Eq. 14), + GeLU Gating (the gating of Eq. 4
# instead of the GLU), + Global Context (distances beyond K share the border weights), rPosNet.
# Separate vocabularies, untied decoder embeddings (the paper's 101M/104M counts).
# The paper marks no significance in this table.
# Settings: recipes/posnet/settings.sh (base). Data: prepare-wmt18-en-zh.sh.
#
#   bash recipes/posnet/table5.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table5 "$@"
source "$(dirname "$0")/settings.sh"
DS=wmt18_en_zh
posnet_size base
row light_convolution $DS --arch lightconv_apptek_transformer_base "${OPT[@]}"
row lightconv         $DS --arch lightconv_apptek_transformer_base "${LIGHTCONV_GLU[@]}" "${OPT[@]}"
row lightconv_gelu    $DS --arch lightconv_apptek_gated_transformer_base "${OPT[@]}"
row lightconv_global  $DS --arch lightconv_apptek_global_transformer_base "${OPT[@]}"
row rposnet           $DS --arch rposnet_transformer_base "${OPT[@]}"
run_table
