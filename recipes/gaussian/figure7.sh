#!/usr/bin/env bash
# Hard-coded Gaussian paper, Figure 7 (section 6.3): where to add learned cross-attention heads
# to SH-X. WMT16 En->Ro (newstest2016) with "the smaller IWSLT En-De architecture" (footnote
# 19: 288 / 507 / 4 heads / 5 layers). Rows: N learned cross heads all in the last decoder layer
# (--learned-cross-heads N), and one learned head in each of the last N layers
# (--learned-cross-layers), N = 1..4 (N = 1 is SH-X; the figure's range is not in the text, so
# N stops at the 4 heads of the IWSLT size: our choice). BLEU: sacreBLEU 'intl'.
# Settings: recipes/gaussian/settings.sh (iwslt).
#
#   bash recipes/gaussian/figure7.sh [--dry-run|--check|--micro] [--rows a,b] ...
# Data: prepare-wmt16-en-ro.sh.
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-figure7 "$@"
source "$(dirname "$0")/settings.sh"
hc_size iwslt
# --micro: a width that 3 heads divide (the micro default, 16, does not); later flags win.
MICRO_FLAGS+=(--encoder-embed-dim 24 --decoder-embed-dim 24)
DS=wmt16_en_ro
row sh_x $DS --arch hc_gaussian_shx_iwslt "${OPT[@]}"  # N = 1: one head in the last layer
for n in 2 3 4; do
  row "same_layer_$n" $DS --arch hc_gaussian_shx_iwslt --learned-cross-heads "$n" --learned-cross-layers=-1 "${OPT[@]}"
done
for n in 2 3 4; do
  row "across_layers_$n" $DS --arch hc_gaussian_shx_iwslt --learned-cross-layers="$(seq -s, "-$n" -1)" "${OPT[@]}"
done
run_table
