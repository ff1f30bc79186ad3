#!/usr/bin/env bash
# WMT'16 English-Romanian, the hard-coded Gaussian paper's En-Ro (its Table 1: 612,422 training
# pairs, newstest2016 with 1,999): Europarl v8 + SETimes2 (the WMT16 training data), valid =
# newsdev2016 (1999), test = newstest2016 (1999). Moses punctuation normalisation, non-printing
# removal and aggressive-hyphen tokenisation (sacremoses), Romanian s/t with cedilla written
# with comma below (the two spellings of the same letters in the corpus), joint BPE, clean
# 1-250 tokens with ratio 1.5 after BPE (train only), joined dictionary. Scored on detokenised
# output with sacreBLEU (the paper's footnote 13).
#
# The paper says only that it follows Sennrich et al. (2016) for preprocessing. Not done here
# (our choices): their truecasing (case is kept) and diacritic removal (the references keep
# their diacritics); the merges (40000, --bpe-merges).
#
#   bash recipes/data/prepare-wmt16-en-ro.sh [--out data/wmt16_en_ro] [--archives DIR] [--workers N]
#        [--bpe-merges 40000]
#
# Archives (official names; in --archives the two WMT16 archives that share names with other
# years are wmt16/dev.tgz and wmt16/test.tgz): training-parallel-ep-v8.tgz, en-ro.txt.zip
# (SETimes2 from OPUS), wmt16/dev.tgz, wmt16/test.tgz.
source "$(dirname "$0")/../lib/data.sh"
data_init wmt16_en_ro "$@"
merges_only 40000
src=en; tgt=ro

fetch http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz
fetch "http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip" en-ro.txt.zip
fetch http://data.statmt.org/wmt16/translation-task/dev.tgz wmt16/dev.tgz
fetch http://data.statmt.org/wmt16/translation-task/test.tgz wmt16/test.tgz
for a in training-parallel-ep-v8.tgz en-ro.txt.zip wmt16/dev.tgz wmt16/test.tgz; do unpack "$a"; done
setimes="$(find "$TMP/orig" -name 'SETIMES*.en-ro.en' | head -n 1)"
[ -n "$setimes" ] || die "en-ro.txt.zip: no SETIMES*.en-ro.en inside"
corpora=("$TMP/orig/training-parallel-ep-v8/europarl-v8.ro-en" "${setimes%.en}")

# ş ţ (cedilla) -> ș ț (comma below): Romanian text uses both for the same letters.
ro_letters() { sed 's/ş/ș/g; s/Ş/Ș/g; s/ţ/ț/g; s/Ţ/Ț/g'; }

log "train"
for l in $src $tgt; do
  cat "${corpora[@]/%/.$l}" > "$TMP/train.raw.$l"
  [ $l = ro ] && { ro_letters < "$TMP/train.raw.$l" > "$TMP/train.letters.$l"; mv "$TMP/train.letters.$l" "$TMP/train.raw.$l"; }
  tokenize -l $l -a --normalize --remove-non-printing "$TMP/train.raw.$l" "$TOK/train.$l"
done

log "valid (newsdev2016) and test (newstest2016)"
for pair in valid:dev/newsdev2016 test:test/newstest2016; do
  split="${pair%%:*}"; set="${pair#*:}"
  text segs "$TMP/orig/$set-enro-src.en.sgm" "$RAW/$split.en"
  text segs "$TMP/orig/$set-enro-ref.ro.sgm" "$TMP/$split.ro"
  ro_letters < "$TMP/$split.ro" > "$RAW/$split.ro"
  for l in $src $tgt; do tokenize -l $l -a --normalize --remove-non-printing "$RAW/$split.$l" "$TOK/$split.$l"; done
done

learn_bpe "$MERGES" "$BPE/code" "$TOK/train.$src" "$TOK/train.$tgt"
for split in train valid test; do
  for l in $src $tgt; do apply_bpe "$BPE/code" "$TOK/$split.$l" "$TMP/$split.bpe.$l"; done
done
clean "$TMP/train.bpe" $src $tgt "$BPE/train" 1 250 --ratio 1.5
for split in valid test; do for l in $src $tgt; do cp "$TMP/$split.bpe.$l" "$BPE/$split.$l"; done; done
binarize $src $tgt --joined-dictionary
write_stats $src $tgt '{
  "target_lang": "ro", "detok": "moses", "sacrebleu_tokenize": "13a", "lowercase": false,
  "compound_split": false,
  "test_sets": {"test": {"name": "newstest2016 en-ro (1999)", "raw_source": "raw/test.en",
                          "raw_ref": "raw/test.ro", "tok_ref": "tok/test.ro"}}
}' --set "bpe=subword-nmt joint $MERGES merges" --set "bpe_merges=$MERGES" --set "dictionaries=joined" \
   --set "corpora=europarl-v8.ro-en,$(basename "${setimes%.en}")"
