#!/usr/bin/env bash
# PosNet paper, Table 4: which attention sites use rPosNet (gated), the rest fairseq's
# multi-head attention. Base models on WMT14 En-De (the dataset is an assumption: the
# project's notes do not name it).
# Hyperparameters as Table 2 (base): 150k updates of ~27k tokens, Adam (0.9, 0.98), 4000
# warm-up, dropout 0.1, label smoothing 0.1, lengths <= 128, 7 checkpoints (every 1000) around
# the best averaged, beam 12, lenpen 1.
#
#   bash recipes/posnet/table4.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table4 "$@"
BASELINES=transformer
DS=wmt14_en_de
source "$(dirname "$0")/settings.sh"
OPT=(--share-all-embeddings "${BASE_OPT[@]}")
R=rposnet; M=mha
row transformer  $DS --arch posnet_transformer_base "${OPT[@]}"
row enc          $DS --arch posnet_transformer_base --encoder-self-mixer $R --encoder-self-gating on "${OPT[@]}"
row dec          $DS --arch posnet_transformer_base --decoder-self-mixer $R --decoder-self-gating on "${OPT[@]}"
row encdec       $DS --arch rposnet_transformer_base "${OPT[@]}"
row encdec_cross $DS --arch rposnet_transformer_base --cross-mixer $R --cross-gating on "${OPT[@]}"
row lower        $DS --arch posnet_transformer_base --encoder-self-mixer $R,$R,$R,$M,$M,$M \
                     --decoder-self-mixer $R,$R,$R,$M,$M,$M --encoder-self-gating on,on,on,off,off,off \
                     --decoder-self-gating on,on,on,off,off,off "${OPT[@]}"
row upper        $DS --arch posnet_transformer_base --encoder-self-mixer $M,$M,$M,$R,$R,$R \
                     --decoder-self-mixer $M,$M,$M,$R,$R,$R --encoder-self-gating off,off,off,on,on,on \
                     --decoder-self-gating off,off,off,on,on,on "${OPT[@]}"
run_table
