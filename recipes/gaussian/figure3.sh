#!/usr/bin/env bash
# Hard-coded Gaussian paper, Figure 3 (section 6.1): BLEU on WMT16 En->Ro (newstest2016) of BASE,
# BASE/-FF, HC-SA and HC-SA/-FF (no feed-forward sub-layers: --no-encoder-ffn --no-decoder-ffn)
# as a function of the number of layers (encoder and decoder alike), base width. The text gives
# the gaps at four layers (BASE - BASE/-FF 1.8, HC-SA - HC-SA/-FF 3.2); the figure's other
# depths are not in the text: 1 to 6 layers here (our choice). BLEU: sacreBLEU 'intl'.
# Settings: recipes/gaussian/settings.sh (wmt).
#
#   bash recipes/gaussian/figure3.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt16-en-ro.sh.
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-figure3 "$@"
source "$(dirname "$0")/settings.sh"
hc_size wmt
DS=wmt16_en_ro
NO_FF=(--no-encoder-ffn --no-decoder-ffn)
for layers in 1 2 3 4 5 6; do
  depth=(--encoder-layers "$layers" --decoder-layers "$layers")
  row "base_l$layers"     $DS "${TRANSFORMER[@]}" "${depth[@]}" "${OPT[@]}"
  row "base_ff_l$layers"  $DS "${TRANSFORMER[@]}" "${depth[@]}" "${NO_FF[@]}" "${OPT[@]}"
  row "hc_sa_l$layers"    $DS --arch hc_gaussian "${depth[@]}" "${OPT[@]}"
  row "hc_sa_ff_l$layers" $DS --arch hc_gaussian "${depth[@]}" "${NO_FF[@]}" "${OPT[@]}"
done
run_table
