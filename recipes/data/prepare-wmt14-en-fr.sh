#!/usr/bin/env bash
# WMT'14 English-French (~36M pairs: Europarl v7, Common Crawl, UN, News Commentary v9,
# 10^9 French-English), following fairseq's prepare-wmt14en2fr.sh: Moses normalisation,
# non-printing removal and aggressive-hyphen tokenisation (sacremoses), joint BPE, clean
# ratio 1.5 and 1-250 after BPE, valid = every 1333rd training pair, test = newstest2014
# full (3003), joined dictionary.
#
#   bash recipes/data/prepare-wmt14-en-fr.sh [--out data/wmt14_en_fr] [--archives DIR] [--workers N]
#        [--bpe-merges 40000] [--paper posnet|aan|gaussian]
#
# 40000 merges is fairseq's setting; the vocabulary it gives is written to stats.json.
# --paper gaussian: Europarl v7 + Common Crawl only (~5M pairs), as the hard-coded Gaussian
# paper trains En-Fr (after Akoury et al., 2019), into data/wmt14_en_fr_epcc (the dataset name
# its recipe reads); valid and test as above. posnet (default) and aan: the full corpus; aan
# with 32000 merges (the AAN+ paper's 32K for every task) unless --bpe-merges says otherwise.
source "$(dirname "$0")/../lib/data.sh"
PAPER=posnet
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --paper ] && { j=$((i + 1)); PAPER="${!j:-}"; }; done
case "$PAPER" in posnet|aan) DATASET=wmt14_en_fr ;; gaussian) DATASET=wmt14_en_fr_epcc ;;
  *) die "--paper $PAPER: posnet, aan or gaussian" ;; esac
data_init "$DATASET" "$@"
MERGES=""
set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
while [ $# -gt 0 ]; do
  case "$1" in
    --bpe-merges) MERGES="$2"; shift ;;
    --paper) shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
case "$PAPER" in aan) MERGES="${MERGES:-32000}" ;; *) MERGES="${MERGES:-40000}" ;; esac
src=en; tgt=fr

fetch http://statmt.org/wmt13/training-parallel-europarl-v7.tgz
fetch http://statmt.org/wmt13/training-parallel-commoncrawl.tgz
fetch http://statmt.org/wmt14/test-full.tgz
for a in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz test-full.tgz; do unpack "$a"; done
corpora=("$TMP/orig/training/europarl-v7.fr-en" "$TMP/orig/commoncrawl.fr-en")
if [ "$PAPER" != gaussian ]; then
  fetch http://statmt.org/wmt13/training-parallel-un.tgz
  fetch http://statmt.org/wmt14/training-parallel-nc-v9.tgz
  fetch http://statmt.org/wmt10/training-giga-fren.tar
  for a in training-parallel-un.tgz training-parallel-nc-v9.tgz training-giga-fren.tar; do unpack "$a"; done
  for l in $src $tgt; do
    g="$TMP/orig/giga-fren.release2.fixed.$l"
    [ -f "$g" ] || gunzip -c "$g.gz" > "$g"
  done
  corpora+=("$TMP/orig/un/undoc.2000.fr-en" "$TMP/orig/training/news-commentary-v9.fr-en"
            "$TMP/orig/giga-fren.release2.fixed")
fi

wmt14_build fren 1333
write_stats $src $tgt '{
  "target_lang": "fr", "detok": "moses", "sacrebleu_tokenize": "13a", "lowercase": false,
  "compound_split": false,
  "test_sets": {"test": {"name": "newstest2014 (full, 3003)", "raw_source": "raw/test.en",
                          "raw_ref": "raw/test.fr", "tok_ref": "tok/test.fr"}}
}' --set "bpe=subword-nmt joint $MERGES merges" --set "dictionaries=joined" \
   --set "corpora=$(for c in "${corpora[@]}"; do basename "$c"; done | paste -sd, -)"
