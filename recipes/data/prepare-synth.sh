#!/usr/bin/env bash
# The synthetic corpus of posnet_fairseq/synth.py, binarized like a real dataset (joined
# dictionary, no BPE: the corpus is already word-tokenised), with stats.json. The table
# recipes use it in --micro mode. Sentences have at most 30 tokens; --long-valid N appends one
# valid pair of more than N tokens (the --micro fixture for a valid sentence longer than the
# models' --max-*-positions, which real valid sets have).
#
#   bash recipes/data/prepare-synth.sh [--out data/synth] [--train 300] [--valid 20] [--test 20]
#        [--long-valid N]
source "$(dirname "$0")/../lib/data.sh"
data_init synth "$@"
N_TRAIN=300; N_VALID=20; N_TEST=20; LONG_VALID=0
set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
while [ $# -gt 0 ]; do
  case "$1" in
    --train) N_TRAIN="$2"; shift ;;
    --valid) N_VALID="$2"; shift ;;
    --test) N_TEST="$2"; shift ;;
    --long-valid) LONG_VALID="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
if [ -f "$OUT/stats.json" ]; then log "$OUT/stats.json exists: nothing to do"; exit 0; fi
"$PYTHON" -m posnet_fairseq.data.synth --out-dir "$RAW" --train "$N_TRAIN" --valid "$N_VALID" --test "$N_TEST" \
  --max-len 30 >&2
if [ "$LONG_VALID" -gt 0 ]; then text long-pair --min-tokens "$LONG_VALID" "$RAW/valid" src tgt; fi
for split in train valid test; do
  for l in src tgt; do cp "$RAW/$split.$l" "$TOK/$split.$l"; cp "$RAW/$split.$l" "$BPE/$split.$l"; done
done
binarize src tgt --joined-dictionary
write_stats src tgt '{
  "target_lang": "tgt", "detok": "none", "sacrebleu_tokenize": "13a", "lowercase": false,
  "compound_split": false,
  "test_sets": {"test": {"name": "synthetic test", "raw_source": "raw/test.src", "raw_ref": "raw/test.tgt",
                          "tok_ref": "tok/test.tgt"}}
}' --set "bpe=none (synthetic, word level)" --set "dictionaries=joined"
