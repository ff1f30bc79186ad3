#!/usr/bin/env bash
# WMT'18 English-Chinese: News Commentary v13 + UN Parallel Corpus v1.0 + CWMT (~24M pairs
# before filtering); valid = newsdev2017, test = newstest2017 (2001 sentences, the PosNet
# paper's test set) and test1 = newstest2018.
#
# English: Moses normalisation, non-printing removal, tokenisation (sacremoses), subword-nmt
# BPE learned on English only. Chinese: SentencePiece (BPE model learned on the Chinese
# training side, raw text in, so it also does the word segmentation; jieba is not used).
# Separate vocabularies: English 32k merges, Chinese 45k pieces (flags). Train is cleaned
# to 1-250 units per side and a length ratio of at most 2.0 after segmentation.
#
# Manual downloads (registration), put into --archives DIR:
#   UNv1.0.en-zh.tar.gz.00 and UNv1.0.en-zh.tar.gz.01   https://conferences.unite.un.org/uncorpus
#   cwmt/   a directory of parallel plain-text files NAME.en / NAME.zh (one sentence per line),
#           made from the CWMT corpora (casia2015, casict2011, casict2015, datum2015,
#           datum2017, neu2017) of http://nlp.nju.edu.cn/cwmt-wmt
# The recipe stops naming what is missing; --without un,cwmt builds from what remains
# (a smaller corpus than the papers'; stats.json records what went in).
#
#   bash recipes/data/prepare-wmt18-en-zh.sh [--out data/wmt18_en_zh] [--archives DIR] [--workers N]
#        [--en-bpe-merges 32000] [--zh-spm-vocab 45000] [--without un,cwmt]
source "$(dirname "$0")/../lib/data.sh"
data_init wmt18_en_zh "$@"
EN_MERGES=32000; ZH_VOCAB=45000; WITHOUT=""
set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
while [ $# -gt 0 ]; do
  case "$1" in
    --en-bpe-merges) EN_MERGES="$2"; shift ;;
    --zh-spm-vocab) ZH_VOCAB="$2"; shift ;;
    --without) WITHOUT="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
src=en; tgt=zh
without() { [[ ",$WITHOUT," == *",$1,"* ]]; }

fetch http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz
fetch http://data.statmt.org/wmt17/translation-task/dev.tgz wmt17/dev.tgz
fetch http://data.statmt.org/wmt17/translation-task/test.tgz wmt17/test.tgz
fetch http://data.statmt.org/wmt18/translation-task/test.tgz wmt18/test.tgz
for a in training-parallel-nc-v13.tgz wmt17/dev.tgz wmt17/test.tgz wmt18/test.tgz; do unpack "$a"; done
corpora=("$TMP/orig/training-parallel-nc-v13/news-commentary-v13.zh-en")
parts="news-commentary-v13"
if ! without un; then
  manual UNv1.0.en-zh.tar.gz.00 "UN Parallel Corpus v1.0 en-zh, https://conferences.unite.un.org/uncorpus"
  manual UNv1.0.en-zh.tar.gz.01 "UN Parallel Corpus v1.0 en-zh, https://conferences.unite.un.org/uncorpus"
  if [ ! -f "$TMP/orig/.un.done" ]; then
    cat "$ORIG/UNv1.0.en-zh.tar.gz.00" "$ORIG/UNv1.0.en-zh.tar.gz.01" | tar -xzf - -C "$TMP/orig"
    touch "$TMP/orig/.un.done"
  fi
  corpora+=("$TMP/orig/en-zh/UNv1.0.en-zh"); parts+=",UNv1.0"
fi
if ! without cwmt; then
  manual cwmt "CWMT corpora, http://nlp.nju.edu.cn/cwmt-wmt, as cwmt/NAME.en + cwmt/NAME.zh"
  for f in "$ORIG"/cwmt/*.en; do
    [ -f "${f%.en}.zh" ] || die "cwmt: $f has no ${f%.en}.zh"
    corpora+=("${f%.en}"); parts+=",cwmt/$(basename "${f%.en}")"
  done
fi

log "train ($parts)"
cat "${corpora[@]/%/.en}" > "$TMP/train.raw.en"
cat "${corpora[@]/%/.zh}" > "$TMP/train.raw.zh"
tokenize -l en --normalize --remove-non-printing "$TMP/train.raw.en" "$TMP/train.tok.en"
text printing "$TMP/train.raw.zh" "$TMP/train.tok.zh"

log "valid (newsdev2017) and tests (newstest2017, newstest2018)"
text segs "$TMP/orig/dev/newsdev2017-enzh-src.en.sgm" "$RAW/valid.en"
text segs "$TMP/orig/dev/newsdev2017-enzh-ref.zh.sgm" "$RAW/valid.zh"
for pair in test:newstest2017 test1:newstest2018; do
  split="${pair%%:*}"; set="${pair#*:}"
  text segs "$TMP/orig/test/$set-enzh-src.en.sgm" "$RAW/$split.en"
  text segs "$TMP/orig/test/$set-enzh-ref.zh.sgm" "$RAW/$split.zh"
done
for split in valid test test1; do
  tokenize -l en --normalize --remove-non-printing "$RAW/$split.en" "$TOK/$split.en"
  cp "$RAW/$split.zh" "$TOK/$split.zh"
done

learn_bpe "$EN_MERGES" "$BPE/code.en" "$TMP/train.tok.en"
"$PYTHON" -m posnet_fairseq.cli.spm train --input "$TMP/train.tok.zh" --model-prefix "$BPE/spm.zh" \
  --vocab-size "$ZH_VOCAB" --character-coverage 0.9995 >&2
apply_bpe "$BPE/code.en" "$TMP/train.tok.en" "$TMP/train.seg.en"
"$PYTHON" -m posnet_fairseq.cli.spm encode --model "$BPE/spm.zh.model" < "$TMP/train.tok.zh" > "$TMP/train.seg.zh"
clean "$TMP/train.seg" en zh "$BPE/train" 1 250 --ratio 2.0
for split in valid test test1; do
  apply_bpe "$BPE/code.en" "$TOK/$split.en" "$BPE/$split.en"
  "$PYTHON" -m posnet_fairseq.cli.spm encode --model "$BPE/spm.zh.model" < "$TOK/$split.zh" > "$BPE/$split.zh"
done
binarize en zh
write_stats en zh '{
  "target_lang": "zh", "detok": "none", "sacrebleu_tokenize": "zh", "lowercase": false,
  "compound_split": false, "tokenized_bleu": false,
  "test_sets": {"test": {"name": "newstest2017 en-zh (2001)", "raw_source": "raw/test.en",
                          "raw_ref": "raw/test.zh", "tok_ref": "tok/test.zh"},
                "test1": {"name": "newstest2018 en-zh", "raw_source": "raw/test1.en",
                          "raw_ref": "raw/test1.zh", "tok_ref": "tok/test1.zh"}}
}' --set "corpora=$parts" --set "segmentation=en: sacremoses + subword-nmt $EN_MERGES merges; zh: sentencepiece bpe $ZH_VOCAB" \
   --set "bpe_merges=$EN_MERGES" --set "dictionaries=separate"
