#!/usr/bin/env bash
# PosNet paper (Schmidt & Di Gangi), Table 2: base models on WMT14 En-De, WMT14 En-Fr and
# WMT18 En-Zh (newstest2017 and newstest2018).
#
# Base: 150k updates of ~27k target tokens (--max-tokens 4500 per GPU, --update-freq from the
# world size), Adam (0.9, 0.98), inverse-sqrt schedule with 4000 warm-up updates, dropout 0.1,
# label smoothing 0.1, sentences of at most 128 tokens. A checkpoint every 1000 updates; the 7
# around the best validation perplexity are averaged. Beam 12, length normalisation (lenpen 1).
# The peak learning rate (7e-4) is not in the project's notes: fairseq's base setting.
#
#   bash recipes/posnet/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--data-root data]
#        [--work work/posnet-table2] [--gpus N] [--nodes N --node-rank R --master-addr H]
# Data: recipes/data/prepare-wmt14-en-de.sh (--paper posnet), prepare-wmt14-en-fr.sh,
# prepare-wmt18-en-zh.sh, into --data-root.
source "$(dirname "$0")/../lib/common.sh"
recipe_init posnet-table2 "$@"
BASELINES=transformer

source "$(dirname "$0")/settings.sh"
OPT=(--weight-decay 0.0 "${BASE_OPT[@]}")
# AppTek GaussianNet: fixed Gaussians at offsets -1/0/+1 (encoder, per head) and -1/0 (decoder), biased projections.
GAUSSIANNET=(--encoder-self-mixer hc_gaussian --decoder-self-mixer hc_gaussian
             --hc-encoder-offsets=-1,0,1,-1,0,1,-1,0 --hc-decoder-offsets=-1,0 --hc-bias)

for ds in wmt14_en_de wmt14_en_fr wmt18_en_zh; do
  if [ "$ds" = wmt18_en_zh ]; then EMB=(--share-decoder-input-output-embed); else EMB=(--share-all-embeddings); fi
  row transformer "$ds" --arch posnet_transformer_base "${EMB[@]}" "${OPT[@]}"
  row shaw        "$ds" --arch shaw_transformer_base "${EMB[@]}" "${OPT[@]}"
  row relattn     "$ds" --arch relattn_transformer_base "${EMB[@]}" "${OPT[@]}"
  row gaussiannet "$ds" --arch posnet_transformer_base "${GAUSSIANNET[@]}" "${EMB[@]}" "${OPT[@]}"
  row linearnet   "$ds" --arch linearnet_transformer_base "${EMB[@]}" "${OPT[@]}"
  row glinearnet  "$ds" --arch glinearnet_transformer_base "${EMB[@]}" "${OPT[@]}"
  row fouriernet  "$ds" --arch fouriernet_transformer_base "${EMB[@]}" "${OPT[@]}"
  row lightconv   "$ds" --arch lightconv_apptek_transformer_base "${EMB[@]}" "${OPT[@]}"
  row aposnet     "$ds" --arch aposnet_transformer_base "${EMB[@]}" "${OPT[@]}"
  row rposnet     "$ds" --arch rposnet_transformer_base "${EMB[@]}" "${OPT[@]}"
done
run_table
