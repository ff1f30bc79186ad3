#!/usr/bin/env bash
# WMT'14 English-German (~4.5M pairs: Europarl v7 + Common Crawl + News Commentary v9),
# following fairseq's prepare-wmt14en2de.sh --icml17: Moses punctuation normalisation,
# non-printing character removal and aggressive-hyphen tokenisation (sacremoses), joint BPE,
# clean-corpus ratio 1.5 and 1-250 tokens after BPE (train and valid), valid = every 100th
# training pair, test = newstest2014 full (3003 sentences), joined dictionary.
#
#   bash recipes/data/prepare-wmt14-en-de.sh [--paper posnet|aan] [--bpe-merges N] [--out DIR]
#        [--archives DIR] [--workers N]
#
# Each preparation is its own dataset, data/wmt14_en_de_bpe<merges>: --paper posnet (default)
# -> wmt14_en_de_bpe40k, as the PosNet authors' data/wmt14/en-de/prepare.bash
# (apptek/posnet-position_based_attention): BPE_TOKENS=40000 merges (its Table 1's "44k" is the
# vocabulary these merges give) and News Commentary v12 (WMT17's) in place of v9; --paper aan
# 32000 merges, News Commentary v9 -> wmt14_en_de_bpe32k (the AAN+ paper, section 6.1; the
# hard-coded Gaussian recipe reads it too). --bpe-merges N overrides the merges (and the name).
# The merges, the corpora, the dataset name and the vocabulary size go to stats.json, which the
# tables check. Every recipe's test references map ’ to ' (posnet_fairseq/data/text.py, segs), as
# that script does before scoring.
source "$(dirname "$0")/../lib/data.sh"
PAPER="$(arg_value --paper "$@")"; PAPER="${PAPER:-posnet}"; MERGES="$(arg_value --bpe-merges "$@")"
case "$PAPER" in
  posnet) MERGES="${MERGES:-40000}"; NC=(http://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz v12) ;;
  aan) MERGES="${MERGES:-32000}"; NC=(http://statmt.org/wmt14/training-parallel-nc-v9.tgz v9) ;;
  *) die "--paper $PAPER: posnet or aan" ;;
esac
data_init "wmt14_en_de_$(bpe_name "$MERGES")" "$@"
own_flags_only --paper --bpe-merges
src=en; tgt=de

fetch http://statmt.org/wmt13/training-parallel-europarl-v7.tgz
fetch http://statmt.org/wmt13/training-parallel-commoncrawl.tgz
fetch "${NC[0]}"
fetch http://statmt.org/wmt14/test-full.tgz
for a in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz "$(basename "${NC[0]}")" test-full.tgz; do
  unpack "$a"
done
corpora=("$TMP/orig/training/europarl-v7.de-en" "$TMP/orig/commoncrawl.de-en" "$TMP/orig/training/news-commentary-${NC[1]}.de-en")

wmt14_build deen 100
wmt_stats true "newstest2014 (full, 3003)" "subword-nmt joint $MERGES merges ($PAPER)" \
  "$(for c in "${corpora[@]}"; do basename "$c"; done | paste -sd, -)"
