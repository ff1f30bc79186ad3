#!/usr/bin/env bash
# Spanish-English Bible verses (docs/bible-corpus.md): the Reina-Valera 1909 and the World English
# Bible, both public domain, read from their SWORD modules (posnet_fairseq/data/bible.py), aligned by
# (book, chapter, verse), whole books held out as valid and test, in canonical order (consecutive
# test lines are consecutive verses: posnet-compare --concat-test applies). Writes OUT/raw/
# {train,valid,test}.{es,en,ref}, OUT/raw/test.book (the book of each test line, for posnet-compare
# --test-groups: kept % balanced by book) and OUT/stats.json; the raw text is what posnet-compare takes (it
# learns its own SentencePiece model on train):
#
#   posnet-compare --raw OUT/raw/train.es OUT/raw/train.en --raw-valid OUT/raw/valid.es OUT/raw/valid.en \
#       --raw-test OUT/raw/test.es OUT/raw/test.en --train-max-len 32 --test-groups OUT/raw/test.book ...
#
# --binarize also learns a joint SentencePiece model on train only (--vocab-size, 8000) and writes
# OUT/bpe/{train,valid,test}.{es,en} and OUT/data-bin (joined dictionary) for fairseq-train.
#
# The modules: on Debian/Ubuntu `apt-get install sword-text-sparv sword-text-web` (into
# /usr/share/sword); elsewhere CrossWire's module downloads
# (https://www.crosswire.org/sword/modules/ModDisp.jsp?modType=Bibles), given as the .zip or the folder
# holding mods.d/ with --sword-path. Searched: --sword-path, $SWORD_PATH, ~/.sword, /usr/share/sword.
# Reading them needs pysword: pip install -r requirements/bible.txt.
#
#   bash recipes/data/prepare-bible-es-en.sh [--out data/bible_es_en] [--sword-path PATH]...
#        [--source-module spaRV1909eb] [--target-module engWEB2015eb]
#        [--valid-books Eccl,Jonah,Gal] [--test-books Ruth,Lam,John,Rom] [--binarize [--vocab-size 8000]]
source "$(dirname "$0")/../lib/data.sh"
data_init bible_es_en "$@"
BUILD=(); BINARIZE=0; VOCAB=8000
set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
while [ $# -gt 0 ]; do
  case "$1" in
    --sword-path|--source-module|--target-module|--valid-books|--test-books)
      [ $# -ge 2 ] || die "$1 needs a value"; BUILD+=("$1" "$2"); shift ;;
    --binarize) BINARIZE=1 ;;
    --vocab-size) VOCAB="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
# test.book: each test line's book, the part of its reference (Book.chapter.verse) before the first dot
write_books() { cut -d. -f1 "$RAW/test.ref" > "$TMP/test.book" && mv "$TMP/test.book" "$RAW/test.book"; }
if [ -f "$OUT/stats.json" ]; then
  # a corpus prepared before test.book was written gets it (from its test.ref)
  if [ ! -f "$RAW/test.book" ]; then write_books; log "wrote $RAW/test.book"; fi
  log "$OUT/stats.json exists: nothing to do"; exit 0
fi

log "aligning verses"
if [ "$BINARIZE" = 1 ]; then BUILD+=(--spm-vocab "$VOCAB" --spm-dir "$BPE"); fi
"$PYTHON" -m posnet_fairseq.data.bible --out-dir "$RAW" --stats "$TMP/stats.json" "${BUILD[@]+"${BUILD[@]}"}" >&2
src=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["source_lang"])' "$TMP/stats.json")
tgt=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["target_lang"])' "$TMP/stats.json")
if [ "$BINARIZE" = 1 ]; then binarize "$src" "$tgt" --joined-dictionary; fi
write_books
# stats.json last: its presence marks a finished preparation.
mv "$TMP/stats.json" "$OUT/stats.json"
log "wrote $OUT/stats.json; for posnet-compare: --raw $RAW/train.$src $RAW/train.$tgt" \
    "--raw-valid $RAW/valid.$src $RAW/valid.$tgt --raw-test $RAW/test.$src $RAW/test.$tgt" \
    "--test-groups $RAW/test.book"
