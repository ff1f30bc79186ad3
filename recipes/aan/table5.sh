#!/usr/bin/env bash
# AAN+ paper, Table 5: alternatives to exp() for the NER and WET scores, base models on WMT14
# En->De (newstest2014). Rows: Transformer; exp, Relu and Square, each with AAN+ w/ NER and
# AAN+ w/ WET; the WET rows with Relu and Square (marked † in the paper) train with gradient
# norm clipping at 1.0, as the paper says. Columns: parameters, tokenized BLEU, METEOR.
# Settings: recipes/aan/settings.sh (base).
#
#   bash recipes/aan/table5.sh [--dry-run|--check|--micro] [--rows a,b] ...
source "$(dirname "$0")/../lib/common.sh"
recipe_init aan-table5 "$@"
source "$(dirname "$0")/settings.sh"
DS=wmt14_en_de_bpe32k
aan_size base
row transformer $DS "${TRANSFORMER[@]}" "${OPT[@]}"
for act in exp relu square; do
  clip=()
  [ "$act" = exp ] || clip=(--clip-norm 1.0)
  row "ner_$act" $DS --arch aan_plus_ner --aan-activation "$act" "${OPT[@]}"
  row "wet_$act" $DS --arch aan_plus_wet --aan-activation "$act" "${OPT[@]}" "${clip[@]+"${clip[@]}"}"
done
run_table
