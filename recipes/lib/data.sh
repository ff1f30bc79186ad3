# Shared steps of the data recipes (recipes/data/prepare-*.sh): sourced, not run.
#
# Every data script takes:
#   --out DIR        output (default data/<dataset>): data-bin/, raw/, tok/, stats.json
#   --archives DIR   read archives from DIR instead of downloading (same file names as the
#                    official ones; also $POSNET_ARCHIVES)
#   --workers N      tokenizer / fairseq-preprocess processes (default 4)
# and writes OUT/stats.json (pairs per split, vocab sizes, mean lengths, gamma)
# with an "eval" section that tells the evaluation how to score the test sets.

set -euo pipefail
DATA_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$DATA_LIB/../.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
log() { echo "[$(basename "$0" .sh)] $*" >&2; }

# arg_value FLAG "$@": the value given to FLAG in the arguments (empty if none), read before
# data_init because a script's dataset name (hence its default --out) depends on it.
arg_value() {
  local flag="$1" found=""; shift
  while [ $# -gt 0 ]; do
    [ "$1" = "$flag" ] && found="${2:-}"
    shift
  done
  echo "$found"
}

# bpe_name MERGES: the suffix of a dataset named after its merges (32000 -> bpe32k, 500 -> bpe500).
bpe_name() { if [ $(($1 % 1000)) = 0 ]; then echo "bpe$(($1 / 1000))k"; else echo "bpe$1"; fi; }

# data_usage: the calling script's header comment, then the flags every data script takes (this file's header).
data_usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  echo
  awk '/^# Every data script takes/ { on = 1 } on && !/^#/ { exit } on { sub(/^# ?/, ""); print }' \
    "$DATA_LIB/data.sh"
}

# data_init NAME "$@": parses the common flags; the caller's own flags are left in EXTRA_ARGS. --help prints the
# usage and exits before anything is created.
data_init() {
  DATASET="$1"; shift
  OUT="data/$DATASET"; ARCHIVES="${POSNET_ARCHIVES:-}"; WORKERS=4; EXTRA_ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) data_usage; exit 0 ;;
      --out) OUT="$2"; shift ;;
      --archives) ARCHIVES="$2"; shift ;;
      --workers) WORKERS="$2"; shift ;;
      *) EXTRA_ARGS+=("$1") ;;
    esac
    shift
  done
  mkdir -p "$OUT"/{orig,raw,tok,bpe,tmp}
  OUT="$(cd "$OUT" && pwd)"
  ORIG="$OUT/orig"; RAW="$OUT/raw"; TOK="$OUT/tok"; BPE="$OUT/bpe"; TMP="$OUT/tmp"
}

# merges_only DEFAULT: for a preparation whose one own flag is --bpe-merges N: MERGES from
# EXTRA_ARGS (DEFAULT when not given); any other flag is refused.
merges_only() {
  MERGES="$1"
  set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
  while [ $# -gt 0 ]; do
    case "$1" in
      --bpe-merges) MERGES="$2"; shift ;;
      *) die "unknown option $1" ;;
    esac
    shift
  done
}

# own_flags_only FLAG...: refuses every flag in EXTRA_ARGS but the named ones, each with its value (which the
# preparation read before data_init, with arg_value).
own_flags_only() {
  local own=" $* "
  set -- "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}"
  while [ $# -gt 0 ]; do
    case "$own" in *" $1 "*) shift ;; *) die "unknown option $1" ;; esac
    shift
  done
}

# fetch URL [LOCAL_NAME]: the archive at ORIG/LOCAL_NAME (default: the URL's file name), taken
# from --archives when it is there, otherwise downloaded with resume (curl -C -). Its
# sha256 is checked against recipes/data/SHA256SUMS when that file lists it, and recorded
# in ORIG/SHA256SUMS either way.
fetch() {
  local url="$1" name="${2:-$(basename "$1")}"
  local dest="$ORIG/$name"
  mkdir -p "$(dirname "$dest")"
  if [ -n "$ARCHIVES" ] && [ -f "$ARCHIVES/$name" ]; then
    log "using local archive $ARCHIVES/$name"
    ln -sf "$(cd "$(dirname "$ARCHIVES/$name")" && pwd)/$(basename "$name")" "$dest"
  elif [ -n "$ARCHIVES" ]; then
    die "--archives $ARCHIVES: no $name there (download it from $url)"
  else
    log "downloading $url"
    curl -fL --retry 3 -C - -o "$dest" "$url" || die "download of $url failed (re-run to resume)"
  fi
  local sum known
  sum="$(sha256sum "$dest" | cut -d' ' -f1)"
  echo "$sum  $name" >> "$ORIG/SHA256SUMS"
  known="$(awk -v n="$name" '$2 == n {print $1}' "$REPO_ROOT/recipes/data/SHA256SUMS" 2>/dev/null || true)"
  if [ -n "$known" ] && [ "$known" != "$sum" ]; then
    die "$name: sha256 $sum differs from the recorded $known (corrupt or changed archive; delete it and re-run)"
  fi
}

# manual NAME HOW: an archive that cannot be downloaded by a script (registration needed).
manual() {
  local name="$1" how="$2"
  if [ -n "$ARCHIVES" ] && [ -e "$ARCHIVES/$name" ]; then
    ln -sfn "$(cd "$ARCHIVES" && pwd)/$name" "$ORIG/$name"
  elif [ ! -e "$ORIG/$name" ]; then
    die "$name must be downloaded by hand: $how; put it in --archives DIR"
  fi
}

unpack() {  # unpack ARCHIVE: extracts into TMP/orig once
  local archive="$ORIG/$1" stamp
  stamp="$TMP/orig/.$(echo "$1" | tr '/' '_').done"
  mkdir -p "$TMP/orig"
  [ -f "$stamp" ] && return 0
  case "$archive" in
    *.tgz|*.tar.gz) tar -xzf "$archive" -C "$TMP/orig" ;;
    *.tar) tar -xf "$archive" -C "$TMP/orig" ;;
    *.zip) "$PYTHON" -m zipfile -e "$archive" "$TMP/orig" ;;
    *) die "unpack: unknown archive type $archive" ;;
  esac
  touch "$stamp"
}

# The corpus tools need only the standard library and sacremoses: run from their files, not as modules of the
# package, whose import loads torch and fairseq (about 4 s a call, and a preparation makes 20-30 calls).
text() { "$PYTHON" "$REPO_ROOT/posnet_fairseq/data/text.py" "$@"; }
tokenize() { text tokenize --workers "$WORKERS" "$@"; }
clean() { "$PYTHON" "$REPO_ROOT/posnet_fairseq/data/clean_corpus.py" "$@"; }

# learn_bpe MERGES CODES FILE...: joint subword-nmt codes over the concatenation of FILEs.
learn_bpe() {
  local merges="$1" codes="$2"; shift 2
  log "learning $merges BPE merges on $*"
  cat "$@" | subword-nmt learn-bpe -s "$merges" > "$codes"
}
apply_bpe() { subword-nmt apply-bpe -c "$1" < "$2" > "$3"; }

# binarize SRC TGT [fairseq-preprocess flags...]: BPE/{train,valid,test*} -> OUT/data-bin
binarize() {
  local src="$1" tgt="$2"; shift 2
  local tests=() s
  for s in test test1 test2; do [ -f "$BPE/$s.$src" ] && tests+=("$BPE/$s"); done
  rm -rf "$OUT/data-bin"
  fairseq-preprocess --source-lang "$src" --target-lang "$tgt" --trainpref "$BPE/train" --validpref "$BPE/valid" \
    --testpref "$(IFS=,; echo "${tests[*]}")" --destdir "$OUT/data-bin" --workers "$WORKERS" "$@" >&2
}

# write_stats SRC TGT EVAL_JSON_TEXT [--set k=v ...]: also records the dataset name, which the
# tables check against the one they read (posnet_fairseq/table_runs/datasets.py).
write_stats() {
  local src="$1" tgt="$2" eval_json="$3"; shift 3
  printf '%s\n' "$eval_json" > "$TMP/eval.json"
  "$PYTHON" -m posnet_fairseq.data.stats "$OUT/data-bin" -s "$src" -t "$tgt" --out "$OUT/stats.json" \
    --eval-json "$TMP/eval.json" --set "dataset=$DATASET" "$@"
  log "wrote $OUT/stats.json"
}

# wmt_stats COMPOUND_SPLIT TEST_NAME BPE CORPORA [--set k=v...]: write_stats for the WMT
# preparations ($src -> $tgt, Moses-detokenised, sacreBLEU 13a, cased, one test set "test",
# $MERGES joint merges, joined dictionaries). COMPOUND_SPLIT: true|false (the En-De papers' convention).
wmt_stats() {
  local compound_split="$1" test_name="$2" bpe="$3" corpora="$4"; shift 4
  write_stats $src $tgt "{
  \"target_lang\": \"$tgt\", \"detok\": \"moses\", \"sacrebleu_tokenize\": \"13a\", \"lowercase\": false,
  \"compound_split\": $compound_split,
  \"test_sets\": {\"test\": {\"name\": \"$test_name\", \"raw_source\": \"raw/test.$src\",
                          \"raw_ref\": \"raw/test.$tgt\", \"tok_ref\": \"tok/test.$tgt\"}}
}" --set "bpe=$bpe" --set "bpe_merges=$MERGES" --set "dictionaries=joined" --set "corpora=$corpora" "$@"
}

# wmt14_build PAIR VALID_EVERY: the WMT14 pipeline shared by En-De and En-Fr once the
# corpora listed in ${corpora[@]} are unpacked: concatenate and tokenise them (punctuation
# normalisation, non-printing removal, aggressive hyphens), hold out every VALID_EVERY-th
# pair as valid, newstest2014 (full) as test, joint BPE ($MERGES merges), clean 1-250 tokens
# with ratio 1.5 after BPE (train and valid), binarize with a joined dictionary.
wmt14_build() {
  local pair=$1 every=$2 l split
  log "train"
  for l in $src $tgt; do
    cat "${corpora[@]/%/.$l}" > "$TMP/train.raw.$l"
    tokenize -l $l -a --normalize --remove-non-printing "$TMP/train.raw.$l" "$TMP/train.tok.$l"
  done
  text holdout --every "$every" "$TMP/train.tok" $src $tgt "$TOK/train" "$TOK/valid"

  log "test (newstest2014 full)"
  text segs "$TMP/orig/test-full/newstest2014-$pair-src.$src.sgm" "$RAW/test.$src"
  text segs "$TMP/orig/test-full/newstest2014-$pair-ref.$tgt.sgm" "$RAW/test.$tgt"
  for l in $src $tgt; do tokenize -l $l -a "$RAW/test.$l" "$TOK/test.$l"; done

  learn_bpe "$MERGES" "$BPE/code" "$TOK/train.$src" "$TOK/train.$tgt"
  for split in train valid test; do
    for l in $src $tgt; do apply_bpe "$BPE/code" "$TOK/$split.$l" "$TMP/$split.bpe.$l"; done
  done
  for split in train valid; do clean "$TMP/$split.bpe" $src $tgt "$BPE/$split" 1 250 --ratio 1.5; done
  for l in $src $tgt; do cp "$TMP/test.bpe.$l" "$BPE/test.$l"; done
  binarize $src $tgt --joined-dictionary
}
