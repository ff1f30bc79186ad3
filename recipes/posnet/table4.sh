#!/usr/bin/env bash
# PosNet paper, Table 4: every combination of encoder self-attention, decoder self-attention
# and decoder cross-attention using multi-head attention (✗) or rPosNet (✓), base models on
# WMT14 En->De (newstest2014); BLEU, BLEURT, COMET. The ✗✗✗ row is the Transformer of Table 2
# (sinusoidal positions); every row with rPosNet uses the rPosNet preset (learned position
# embeddings, gated rPosNet where it is placed, multi-head attention elsewhere); rPosNet in
# cross-attention uses gamma = the training set's mean source / target length (Eq. 10).
# The paper marks no significance in this table, and gives no parameter counts.
# Settings: recipes/posnet/settings.sh (base).
#
#   bash recipes/posnet/table4.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table4 "$@"
source "$(dirname "$0")/settings.sh"
DS=wmt14_en_de_bpe44k
posnet_size base
OPT=(--share-all-embeddings "${OPT[@]}")
R=(--arch rposnet_transformer_base)
NO_ENC=(--encoder-self-mixer mha); NO_DEC=(--decoder-self-mixer mha); CROSS=(--cross-mixer rposnet)
row transformer   $DS --arch posnet_transformer_base "${OPT[@]}"
row enc           $DS "${R[@]}" "${NO_DEC[@]}" "${OPT[@]}"
row dec           $DS "${R[@]}" "${NO_ENC[@]}" "${OPT[@]}"
row cross         $DS "${R[@]}" "${NO_ENC[@]}" "${NO_DEC[@]}" "${CROSS[@]}" "${OPT[@]}"
row enc_dec       $DS "${R[@]}" "${OPT[@]}"
row enc_cross     $DS "${R[@]}" "${NO_DEC[@]}" "${CROSS[@]}" "${OPT[@]}"
row dec_cross     $DS "${R[@]}" "${NO_ENC[@]}" "${CROSS[@]}" "${OPT[@]}"
row enc_dec_cross $DS "${R[@]}" "${CROSS[@]}" "${OPT[@]}"
run_table
