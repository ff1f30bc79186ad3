#!/usr/bin/env bash
# The length-generalisation study (docs/length-generalisation.md, "The study"): the remedies alone and
# combined with the position schemes, tiny models, trained on short pairs and tested far beyond them, by
# posnet-compare, on two corpora:
#   synthetic  the embedded corpus: training pairs of at most 20 words, test sentences up to 50;
#   bible      the Bible corpus Es->En (docs/bible-corpus.md): training pairs of at most 32 pieces, tested on
#              the held-out books and on runs of K consecutive test verses joined (--concat-test K).
# One posnet-compare run per corpus, in OUT/synthetic and OUT/bible; the same command again resumes them,
# and adding models or seeds later trains only what is new. The Bible corpus first:
#
#   bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
#
#   bash recipes/compare/length-study.sh [--dry-run] [--corpus synthetic|bible|both] [--data data/bible_es_en]
#        [--out runs/length-study] [--models A,B,...] [--concat-test 4] [POSNET-COMPARE FLAGS...]
#
#   --dry-run        print the posnet-compare commands, one per corpus, and exit (writes nothing; needs no corpus)
#   --corpus C       synthetic, bible or both (default: both, synthetic first)
#   --data DIR       the prepared Bible corpus: DIR/raw/{train,valid,test}.{es,en} and DIR/stats.json
#                    (and DIR/raw/test.book, the book of each test verse, where it is: --test-groups, every
#                    kept % balanced by book)
#   --out DIR        the study's directory: OUT/synthetic and OUT/bible are posnet-compare's --out
#   --models A,B,... only these models of the grid, by name (the baseline, the Transformer, is always first)
#   --concat-test K  bible: test verses joined into one long example (default 4)
# Every other flag goes to both posnet-compare runs as it is, after the recipe's, e.g. --seeds 3
# --budget converge:40e --jobs 2, or --reuse-from RUN (repeatable) to take the models that a verdict run of
# recipes/compare/ trained with the same data and settings (each corpus's run takes only its own: the data are
# compared by content). Training runs with OMP_NUM_THREADS=1 unless it is set.
#
# The grid: one model per line below, NAME, its training flags and its generation flags. A name ARCH+LABEL is
# ARCH trained with the flags (posnet-compare --arch-flags), or translated with the generation flags
# (--arch-generate-flags): rope_transformer_tiny+yarn is RoPE's own training (posnet-compare trains it once),
# translated with YaRN scaling and --rope-scaling-factor auto, a sentence's factor max(1, n / L) with L the
# longest training source, EOS included (--train-max-len + 1): only sources longer than any in training scale.
# rope_transformer_tiny+randconcat is RoPE trained with both remedies (randomized positions on both sides and
# concatenated examples) and translated with spread test positions: the pick for RoPE of
# docs/length-generalisation.md. Its spread test positions are a training flag, so that fairseq's validation
# (the convergence rule, the best checkpoints averaged) measures the positions it is translated with.
source "$(dirname "$0")/../lib/common.sh"
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0
fi
BOTH_SIDES() { echo "--encoder-position-augmentation $1 --decoder-position-augmentation $1"; }
CONCAT="--task translation_concat --concat-max-pairs 3 --concat-rate 0.5"
# grid: NAME|training flags|generation flags of the study's models (a tab would not do: read merges empty
# fields between tabs), for a training limit of
# $1 tokens per side (EOS excluded)
grid() {
  local limit="$1"
  local yarn="--model-overrides \"{'rope_scaling': 'yarn', 'rope_scaling_factor': 'auto', 'rope_scaling_train_length': $((limit + 1))}\""
  printf '%s|%s|%s\n' \
    posnet_transformer_tiny "" "" \
    posnet_transformer_tiny+shape "$(BOTH_SIDES shape)" "" \
    posnet_transformer_tiny+randomized "$(BOTH_SIDES randomized)" "" \
    posnet_transformer_tiny+concat "$CONCAT" "" \
    rope_transformer_tiny "" "" \
    rope_transformer_tiny+randomized "$(BOTH_SIDES randomized)" "" \
    rope_transformer_tiny+yarn "" "$yarn" \
    rope_transformer_tiny+concat "$CONCAT" "" \
    rope_transformer_tiny+randconcat "$(BOTH_SIDES randomized) --randomized-test-positions spread $CONCAT" "" \
    alibi_transformer_tiny "" "" \
    alibi_seq2seq_transformer_tiny "" "" \
    kerple_transformer_tiny "" "" \
    fire_transformer_tiny "" "" \
    dpb_transformer_tiny "" "" \
    xpos_transformer_tiny "" "" \
    nope_transformer_tiny "" "" \
    t5bias_transformer_tiny "" "" \
    aposnet_transformer_tiny "" "" \
    aposnet_transformer_tiny+concat "$CONCAT" "" \
    rposnet_transformer_tiny "" ""
}
DRY_RUN=0; CORPUS=both; DATA=data/bible_es_en; OUT=runs/length-study; MODELS=; CONCAT_TEST=4; PASSED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --corpus|--data|--out|--models|--concat-test)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --corpus) CORPUS="$2" ;; --data) DATA="$2" ;; --out) OUT="$2" ;; --models) MODELS="$2" ;;
        --concat-test) CONCAT_TEST="$2" ;;
      esac
      shift ;;
    *) PASSED+=("$1") ;;
  esac
  shift
done
case "$CORPUS" in
  synthetic) CORPORA=(synthetic) ;; bible) CORPORA=(bible) ;; both) CORPORA=(synthetic bible) ;;
  *) die "--corpus $CORPUS: choose synthetic, bible or both" ;;
esac
# --models: every name must be one of the grid's
if [ -n "$MODELS" ]; then
  for name in ${MODELS//,/ }; do
    grid 20 | cut -d'|' -f1 | grep -xF -- "$name" > /dev/null || die "--models: $name is not a model of the study (see --help)"
  done
fi

# command_for CORPUS LIMIT DATA-FLAGS...: the posnet-compare command of one corpus, in COMMAND
command_for() {
  local corpus="$1" limit="$2"; shift 2
  local archs=() flags=() name model_flags generate_flags baseline
  baseline="$(grid "$limit" | awk -F'|' 'NR == 1 { print $1 }')"  # reads it all: no SIGPIPE
  while IFS='|' read -r name model_flags generate_flags; do
    if [ -n "$MODELS" ] && [ "$name" != "$baseline" ] && [[ ",$MODELS," != *",$name,"* ]]; then
      continue
    fi
    archs+=("$name")
    [ -z "$model_flags" ] || flags+=(--arch-flags "$name=$model_flags")
    [ -z "$generate_flags" ] || flags+=(--arch-generate-flags "$name=$generate_flags")
  done < <(grid "$limit")
  COMMAND=("$PYTHON" -m posnet_fairseq.cli.compare --archs "$(IFS=,; echo "${archs[*]}")" ${flags[@]+"${flags[@]}"}
    "$@" --out "$OUT/$corpus" ${PASSED[@]+"${PASSED[@]}"})
}

if [ "$DRY_RUN" = 0 ] && [[ " ${CORPORA[*]} " == *" bible "* ]] && [ ! -f "$DATA/stats.json" ]; then
  die "--data $DATA: no prepared corpus (no stats.json); build it with: bash $REPO_ROOT/recipes/data/prepare-bible-es-en.sh --out $DATA"
fi
RAW="$DATA/raw"
for corpus in "${CORPORA[@]}"; do
  if [ "$corpus" = synthetic ]; then
    command_for synthetic 20 --train-max-len 20 --test-max-len 50
  else
    # the book of each test verse, where the corpus has it: every kept % is then balanced by book
    BOOKS=(); [ ! -f "$RAW/test.book" ] || BOOKS=(--test-groups "$RAW/test.book")
    command_for bible 32 --raw "$RAW/train.es" "$RAW/train.en" --raw-valid "$RAW/valid.es" "$RAW/valid.en" \
      --raw-test "$RAW/test.es" "$RAW/test.en" --train-max-len 32 --concat-test "$CONCAT_TEST" \
      ${BOOKS[@]+"${BOOKS[@]}"}
  fi
  if [ "$DRY_RUN" = 1 ]; then
    echo "OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONPATH=$(q "$REPO_ROOT")$(printf ' %q' "${COMMAND[@]}")"
    continue
  fi
  (export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
   "${COMMAND[@]}")
done
