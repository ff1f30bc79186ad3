#!/usr/bin/env bash
# WMT'14 English-French (~36M pairs: Europarl v7, Common Crawl, UN, News Commentary v9,
# 10^9 French-English), following fairseq's prepare-wmt14en2fr.sh: Moses normalisation,
# non-printing removal and aggressive-hyphen tokenisation (sacremoses), joint BPE, clean
# ratio 1.5 and 1-250 after BPE, valid = every 1333rd training pair, test = newstest2014
# full (3003), joined dictionary.
#
#   bash recipes/data/prepare-wmt14-en-fr.sh [--out data/wmt14_en_fr] [--archives DIR] [--workers N]
#        [--bpe-merges 40000]
#
# 40000 merges is fairseq's setting; the vocabulary it gives is written to stats.json.
source "$(dirname "$0")/../lib/data.sh"
data_init wmt14_en_fr "$@"
MERGES=40000
set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
while [ $# -gt 0 ]; do
  case "$1" in
    --bpe-merges) MERGES="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
src=en; tgt=fr

fetch http://statmt.org/wmt13/training-parallel-europarl-v7.tgz
fetch http://statmt.org/wmt13/training-parallel-commoncrawl.tgz
fetch http://statmt.org/wmt13/training-parallel-un.tgz
fetch http://statmt.org/wmt14/training-parallel-nc-v9.tgz
fetch http://statmt.org/wmt10/training-giga-fren.tar
fetch http://statmt.org/wmt14/test-full.tgz
for a in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz training-parallel-un.tgz \
         training-parallel-nc-v9.tgz training-giga-fren.tar test-full.tgz; do
  unpack "$a"
done
for l in $src $tgt; do
  g="$TMP/orig/giga-fren.release2.fixed.$l"
  [ -f "$g" ] || gunzip -c "$g.gz" > "$g"
done
corpora=("$TMP/orig/training/europarl-v7.fr-en" "$TMP/orig/commoncrawl.fr-en" "$TMP/orig/un/undoc.2000.fr-en"
         "$TMP/orig/training/news-commentary-v9.fr-en" "$TMP/orig/giga-fren.release2.fixed")

wmt14_build fren 1333
write_stats $src $tgt '{
  "target_lang": "fr", "detok": "moses", "sacrebleu_tokenize": "13a", "lowercase": false,
  "compound_split": false,
  "test_sets": {"test": {"name": "newstest2014 (full, 3003)", "raw_source": "raw/test.en",
                          "raw_ref": "raw/test.fr", "tok_ref": "tok/test.fr"}}
}' --set "bpe=subword-nmt joint $MERGES merges" --set "dictionaries=joined"
