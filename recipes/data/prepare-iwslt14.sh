#!/usr/bin/env bash
# IWSLT'14 German-English, as fairseq's examples/translation/prepare-iwslt14.sh does it:
# train = TED train.tags minus every 23rd line (valid), test = TED dev2010 + TEDx dev2012 +
# TED tst2010-2012; Moses tokenisation (sacremoses), clean-corpus ratio 1.5 and 1-175
# tokens on train, lowercased, joint BPE with 10k merges, one joined dictionary (the PosNet
# paper's Table 1: one 10k vocabulary; its Small models share all embeddings).
# Expected sizes: ~160k / 7283 / 6750 pairs (the PosNet paper's Table 1).
#
#   bash recipes/data/prepare-iwslt14.sh [--out data/iwslt14_de_en] [--archives DIR]
#        [--workers N] [--bpe-merges 10000]
source "$(dirname "$0")/../lib/data.sh"
data_init iwslt14_de_en "$@"
merges_only 10000
src=de; tgt=en

fetch http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz
unpack de-en.tgz
in="$TMP/orig/de-en"

log "train"
for l in $src $tgt; do
  text iwslt-train "$in/train.tags.de-en.$l" "$TMP/train.tags.$l"
  tokenize -l $l --lowercase "$TMP/train.tags.$l" "$TMP/train.tok.$l"
done
clean "$TMP/train.tok" $src $tgt "$TMP/train.clean" 1 175 --ratio 1.5
text holdout --every 23 "$TMP/train.clean" $src $tgt "$TOK/train" "$TOK/valid"

log "valid/test sources"
for l in $src $tgt; do
  : > "$RAW/test.$l"
  for set in IWSLT14.TED.dev2010 IWSLT14.TEDX.dev2012 IWSLT14.TED.tst2010 IWSLT14.TED.tst2011 IWSLT14.TED.tst2012; do
    text segs "$in/$set.de-en.$l.xml" "$TMP/$set.$l"
    cat "$TMP/$set.$l" >> "$RAW/test.$l"
  done
  tokenize -l $l --lowercase "$RAW/test.$l" "$TOK/test.$l"
done

learn_bpe "$MERGES" "$BPE/code" "$TOK/train.$src" "$TOK/train.$tgt"
for split in train valid test; do
  for l in $src $tgt; do apply_bpe "$BPE/code" "$TOK/$split.$l" "$BPE/$split.$l"; done
done
binarize $src $tgt --joined-dictionary
write_stats $src $tgt '{
  "target_lang": "en", "detok": "moses", "sacrebleu_tokenize": "13a", "lowercase": true,
  "compound_split": false,
  "test_sets": {"test": {"name": "IWSLT14 De-En test (dev2010+TEDx dev2012+tst2010-2012)",
                          "raw_source": "raw/test.de", "raw_ref": "raw/test.en", "tok_ref": "tok/test.en"}}
}' --set "bpe=subword-nmt joint $MERGES merges" --set "bpe_merges=$MERGES" --set "dictionaries=joined"
