#!/usr/bin/env bash
# PosNet paper, Table 6: the GeLU gating (Eq. 4) with and without each mixer. Base models
# on WMT14 En-De (the Table 6 parameter counts are of the base En-De models); hyperparameters
# as Table 2 (base): 150k updates of ~27k tokens, Adam (0.9, 0.98), 4000 warm-up, dropout
# 0.1, label smoothing 0.1, lengths <= 128, 7 checkpoints (every 1000) around the best
# averaged, beam 12, lenpen 1.
#
#   bash recipes/posnet/table6.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data] [--gpus N] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table6 "$@"
BASELINES=transformer
DS=wmt14_en_de
source "$(dirname "$0")/settings.sh"
OPT=(--share-all-embeddings "${BASE_OPT[@]}")
GATE_ON=(--encoder-self-gating on --decoder-self-gating on)
GATE_OFF=(--encoder-self-gating off --decoder-self-gating off)
row transformer       $DS --arch posnet_transformer_base "${OPT[@]}"
row transformer_gated $DS --arch posnet_transformer_base "${GATE_ON[@]}" "${OPT[@]}"
row linearnet         $DS --arch linearnet_transformer_base "${OPT[@]}"
row glinearnet        $DS --arch glinearnet_transformer_base "${OPT[@]}"
row aposnet_nogate    $DS --arch aposnet_transformer_base "${GATE_OFF[@]}" "${OPT[@]}"
row aposnet           $DS --arch aposnet_transformer_base "${OPT[@]}"
row rposnet_nogate    $DS --arch rposnet_transformer_base "${GATE_OFF[@]}" "${OPT[@]}"
row rposnet           $DS --arch rposnet_transformer_base "${OPT[@]}"
run_table
