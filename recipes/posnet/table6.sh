#!/usr/bin/env bash
# PosNet paper, Table 6 (appendix D, Figure 2): each attention with (✓) and without (✗) the
# GeLU gating of Eq. 4, base models on WMT14 En->De (newstest2014); parameters, BLEU, BLEURT,
# COMET. Rows: Transformer, Shaw et al. (2018), Rel. Self-Attention (content queries x
# relative keys), aPosNet, rPosNet, each ✗ and ✓. The paper marks no significance in this table.
# Settings: recipes/posnet/settings.sh (base).
#
#   bash recipes/posnet/table6.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table6 "$@"
source "$(dirname "$0")/settings.sh"
DS=wmt14_en_de_bpe44k
posnet_size base
OPT=(--share-all-embeddings "${OPT[@]}")
ON=(--encoder-self-gating on --decoder-self-gating on)
OFF=(--encoder-self-gating off --decoder-self-gating off)
row transformer       $DS --arch posnet_transformer_base "${OPT[@]}"
row transformer_gated $DS --arch posnet_transformer_base "${ON[@]}" "${OPT[@]}"
row shaw              $DS --arch shaw_transformer_base "${OPT[@]}"
row shaw_gated        $DS --arch shaw_transformer_base "${ON[@]}" "${OPT[@]}"
row relattn           $DS --arch relattn_transformer_base "${OPT[@]}"
row relattn_gated     $DS --arch relattn_transformer_base "${ON[@]}" "${OPT[@]}"
row aposnet_ungated   $DS --arch aposnet_transformer_base "${OFF[@]}" "${OPT[@]}"
row aposnet           $DS --arch aposnet_transformer_base "${OPT[@]}"
row rposnet_ungated   $DS --arch rposnet_transformer_base "${OFF[@]}" "${OPT[@]}"
row rposnet           $DS --arch rposnet_transformer_base "${OPT[@]}"
run_table
