#!/usr/bin/env bash
# WMT'16 English-Romanian, the hard-coded Gaussian paper's En-Ro (its Table 1: 612,422 training
# pairs, newstest2016 with 1,999): Europarl v8 + SETimes2 (the WMT16 training data), valid =
# newsdev2016 (1999), test = newstest2016 (1999). Moses punctuation normalisation, non-printing
# removal and tokenisation (sacremoses), Romanian s/t with cedilla written with comma below (the
# two spellings of the same letters in the corpus), joint BPE learned on the training data, the
# training pairs cleaned after BPE (below), joined dictionary. Scored on detokenised output with
# sacreBLEU (the paper's footnote 13).
#
#   bash recipes/data/prepare-wmt16-en-ro.sh [--paper gaussian] [--bpe-merges N] [--out DIR]
#        [--archives DIR] [--workers N]
#
# Each preparation is its own dataset:
# --paper gaussian -> data/wmt16_en_ro_nodiacritics: the paper's (footnote 13: "we follow previous
#   work for preprocessing (Sennrich et al., 2016)"), as the authors' process_enro.sh ran it
#   (fallcat/stupidNMT): the Romanian side of train, dev and test, references included, without
#   diacritics (s/t with comma below or cedilla, a with breve or circumflex, i with circumflex ->
#   s, t, a, i: the WMT16 scripts' normalise-romanian.py and remove-diacritics.py), Moses
#   replace-unicode-punctuation before the normalisation, tokenised without hyphen splitting, the
#   English side of dev and test from *-roen-ref.en.sgm, only the training pairs with an empty side
#   dropped (process_enro.py's binarize: Europarl v8 and SETimes2 have 399,375 + 213,047 =
#   612,422 lines, the paper's Table 1 count), 32000 merges (its MERGE_OPS). Not as that script
#   (ours, said): BPE is learned on the training data only (its line 64 learns it on train, dev
#   and test together); Moses escaping (&apos; ...; undone by the detokeniser before scoring); no truecasing.
# default -> data/wmt16_en_ro: diacritics kept (comma below), aggressive hyphen splitting
#   (tokenizer.perl -a), no replace-unicode-punctuation, English dev/test from *-enro-src.en.sgm,
#   training pairs cleaned to 1-250 tokens with ratio 1.5 (fairseq's WMT recipes; fewer pairs than
#   612,422), 40000 merges, for users who want Romanian output with its diacritics.
# --bpe-merges N overrides the merges (the dataset name stays).
#
# Archives (official names; in --archives the two WMT16 archives that share names with other
# years are wmt16/dev.tgz and wmt16/test.tgz): training-parallel-ep-v8.tgz, en-ro.txt.zip
# (SETimes2 from OPUS), wmt16/dev.tgz, wmt16/test.tgz.
source "$(dirname "$0")/../lib/data.sh"
PAPER="$(arg_value --paper "$@")"; MERGES="$(arg_value --bpe-merges "$@")"
case "$PAPER" in
  gaussian) MERGES="${MERGES:-32000}"; DATASET=wmt16_en_ro_nodiacritics; RO_FLAGS=(--remove-diacritics)
    TOK_FLAGS=(--replace-unicode-punct); EN_SGM=roen-ref
    # process_enro.py's binarize drops a pair with an empty side, nothing else: no token limit, no ratio
    CLEANING="empty pairs only"; CLEAN=(1 1000000000) ;;
  "") MERGES="${MERGES:-40000}"; DATASET=wmt16_en_ro; RO_FLAGS=(); TOK_FLAGS=(-a); EN_SGM=enro-src
    CLEANING="1-250 tokens, ratio 1.5"; CLEAN=(1 250 --ratio 1.5) ;;
  *) die "--paper $PAPER: gaussian, or none for the preparation with diacritics" ;;
esac
data_init "$DATASET" "$@"
own_flags_only --paper --bpe-merges
src=en; tgt=ro

fetch http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz
fetch "http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip" en-ro.txt.zip
fetch http://data.statmt.org/wmt16/translation-task/dev.tgz wmt16/dev.tgz
fetch http://data.statmt.org/wmt16/translation-task/test.tgz wmt16/test.tgz
for a in training-parallel-ep-v8.tgz en-ro.txt.zip wmt16/dev.tgz wmt16/test.tgz; do unpack "$a"; done
setimes="$(find "$TMP/orig" -name 'SETIMES*.en-ro.en' | head -n 1)"
[ -n "$setimes" ] || die "en-ro.txt.zip: no SETIMES*.en-ro.en inside"
corpora=("$TMP/orig/training-parallel-ep-v8/europarl-v8.ro-en" "${setimes%.en}")

# ş ţ (cedilla) -> ș ț (comma below): Romanian text uses both for the same letters; --paper gaussian
# then removes the diacritics (posnet_fairseq/data/text.py, romanian_line).
ro_letters() { text romanian "${RO_FLAGS[@]+"${RO_FLAGS[@]}"}" "$1" "$2"; }

log "train"
for l in $src $tgt; do
  cat "${corpora[@]/%/.$l}" > "$TMP/train.raw.$l"
  [ $l = ro ] && { ro_letters "$TMP/train.raw.$l" "$TMP/train.letters.$l"; mv "$TMP/train.letters.$l" "$TMP/train.raw.$l"; }
  tokenize -l $l "${TOK_FLAGS[@]+"${TOK_FLAGS[@]}"}" --normalize --remove-non-printing "$TMP/train.raw.$l" "$TOK/train.$l"
done

log "valid (newsdev2016) and test (newstest2016)"
for pair in valid:dev/newsdev2016 test:test/newstest2016; do
  split="${pair%%:*}"; set="${pair#*:}"
  text segs "$TMP/orig/$set-$EN_SGM.en.sgm" "$RAW/$split.en"
  text segs "$TMP/orig/$set-enro-ref.ro.sgm" "$TMP/$split.ro"
  ro_letters "$TMP/$split.ro" "$RAW/$split.ro"
  for l in $src $tgt; do tokenize -l $l "${TOK_FLAGS[@]+"${TOK_FLAGS[@]}"}" --normalize --remove-non-printing "$RAW/$split.$l" "$TOK/$split.$l"; done
done

# On the training data only (process_enro.sh line 64 also learns on dev and test: not followed).
learn_bpe "$MERGES" "$BPE/code" "$TOK/train.$src" "$TOK/train.$tgt"
for split in train valid test; do
  for l in $src $tgt; do apply_bpe "$BPE/code" "$TOK/$split.$l" "$TMP/$split.bpe.$l"; done
done
clean "$TMP/train.bpe" $src $tgt "$BPE/train" "${CLEAN[@]}"
for split in valid test; do for l in $src $tgt; do cp "$TMP/$split.bpe.$l" "$BPE/$split.$l"; done; done
binarize $src $tgt --joined-dictionary
wmt_stats false "newstest2016 en-ro (1999)" "subword-nmt joint $MERGES merges" \
  "europarl-v8.ro-en,$(basename "${setimes%.en}")" \
  --set "romanian_diacritics=$([ "$PAPER" = gaussian ] && echo removed || echo kept)" \
  --set "train_cleaning=$CLEANING"
