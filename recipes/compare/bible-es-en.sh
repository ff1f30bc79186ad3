#!/usr/bin/env bash
# posnet-compare on the Bible corpus, Es->En (docs/bible-corpus.md, docs/compare.md): the Transformer,
# rPosNet, aPosNet, HC-SA, AAN+ AVG, TISA, RoPE and ALiBi, tiny, trained on the verse pairs of at most 32
# SentencePiece pieces per side, tested on the held-out books in document order (--raw-test) and on runs
# of K consecutive test verses joined (--concat-test K, default 4: about 4 x 28 pieces, far beyond the 32 of
# training). The corpus first:
#
#   bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
#
#   bash recipes/compare/bible-es-en.sh [--dry-run] [--data data/bible_es_en] [--out runs/bible-es-en]
#        [--archs A,B,...] [--concat-test 4] [POSNET-COMPARE FLAGS...]
#
#   --dry-run        print the posnet-compare command and exit (writes nothing; needs no corpus)
#   --data DIR       the prepared corpus: DIR/raw/{train,valid,test}.{es,en} and DIR/stats.json
#                    (and DIR/raw/test.book, the book of each test verse, where it is: --test-groups, every
#                    kept % balanced by book)
#   --out DIR        posnet-compare's --out; the same command again resumes the run
#   --archs A,B,...  the architectures (default: the eight above; the first is the baseline)
#   --concat-test K  test pairs joined into one long example
# Every other flag goes to posnet-compare as it is, after the recipe's (where a flag is given twice, the
# later wins), e.g. --seeds 3 --budget converge:40e --jobs 2. Training runs with OMP_NUM_THREADS=1 unless
# it is set (these models gain nothing from a second thread).
source "$(dirname "$0")/../lib/common.sh"
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0
fi
ARCHS=posnet_transformer_tiny,rposnet_transformer_tiny,aposnet_transformer_tiny,hc_gaussian_tiny,aan_plus_avg_tiny,tisa_transformer_tiny,rope_transformer_tiny,alibi_transformer_tiny
DRY_RUN=0; DATA=data/bible_es_en; OUT=runs/bible-es-en; CONCAT=4; PASSED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --data|--out|--archs|--concat-test)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in --data) DATA="$2" ;; --out) OUT="$2" ;; --archs) ARCHS="$2" ;; --concat-test) CONCAT="$2" ;; esac
      shift ;;
    *) PASSED+=("$1") ;;
  esac
  shift
done
RAW="$DATA/raw"
# the book of each test verse, where the corpus has it: every kept % is then balanced by book
BOOKS=(); [ ! -f "$RAW/test.book" ] || BOOKS=(--test-groups "$RAW/test.book")
COMMAND=("$PYTHON" -m posnet_fairseq.cli.compare --archs "$ARCHS"
  --raw "$RAW/train.es" "$RAW/train.en" --raw-valid "$RAW/valid.es" "$RAW/valid.en"
  --raw-test "$RAW/test.es" "$RAW/test.en" --train-max-len 32 --concat-test "$CONCAT" ${BOOKS[@]+"${BOOKS[@]}"}
  --out "$OUT" ${PASSED[@]+"${PASSED[@]}"})
if [ "$DRY_RUN" = 1 ]; then
  echo "OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONPATH=$(q "$REPO_ROOT")$(printf ' %q' "${COMMAND[@]}")"
  exit 0
fi
[ -f "$DATA/stats.json" ] || die "--data $DATA: no prepared corpus (no stats.json); build it with: bash $REPO_ROOT/recipes/data/prepare-bible-es-en.sh --out $DATA"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "${COMMAND[@]}"
