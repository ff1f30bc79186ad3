# Shared machinery of the table recipes (recipes/<paper>/*.sh): sourced, not run.
#
# A table script names its table (`recipe_init TABLE "$@"`) and calls `run_table`. The table's
# rows, their fairseq-train flags and settings are declared once, in Python
# (posnet_fairseq/table_runs/<paper>.py); run_table reads them (table_runs/rows.py), turns
# them into a plan, a plain shell script with one command per line (train -> average ->
# generate -> evaluate per row, then the table), checks that every training command parses
# with fairseq and the plugin (architecture, mixers, flags) before anything starts, and runs it.
#
# Options every table script takes (docs/recipes.md):
#   --dry-run             print the plan and exit (writes nothing: no work directory, no plan.sh)
#   --check               check the plan (every arch/flag exists) and the datasets (their stats.json
#                         hold the paper's BPE merges, vocabulary and split sizes), then exit
#   --micro               run on the synthetic corpus with tiny dims and 4 updates
#   --rows A,B            only these rows (default: all)
#   --datasets A,B        only the rows on these datasets (default: all)
#   --data-root DIR       prepared datasets: DIR/<dataset>/{data-bin,stats.json} (default: data)
#   --work DIR            checkpoints, outputs and the table (default: work/<table>)
#   --gpus N              GPUs per node (default: the GPUs torch sees, $POSNET_RECIPE_GPUS if set;
#                         0 trains on the CPU)
#   --no-fp16             train in fp32 on GPUs (default: --fp16, as fairseq's WMT recipes)
#   --max-tokens N        at most N tokens per GPU and step (default: the row's); --update-freq and
#                         the tokens per GPU are computed so that GPUs x tokens x update-freq is
#                         the paper's tokens per update
#   --nodes N --node-rank R --master-addr HOST --master-port PORT
#                         multi-node training through torchrun
#   --cpu-procs N         N data-parallel CPU processes (gloo), for testing
#   --launcher slurm      each row's training a SLURM job of --nodes x --gpus GPUs (a multi-node row
#                         runs torchrun on each node), its averaging and evaluation dependent jobs,
#                         the table a job after them; with --dry-run: print the batch scripts.
#                         A re-run attaches to running jobs and skips finished ones (docs/cluster.md)
#   --cpus-per-job N --partition P --time MINUTES --sbatch OPTION[=VALUE] --poll-seconds S
#                         the jobs' other resources (posnet_fairseq/launcher/flags.py)
#   --comet-model PATH --comet-python PY --bleurt-model PATH --bleurt-python PY
#                         optional learned metrics (separate environment)

set -euo pipefail
RECIPES_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$RECIPES_LIB/../.." && pwd)"
PLUGIN_DIR="$REPO_ROOT/posnet_fairseq"
PYTHON="${PYTHON:-python}"

ROW_NAMES=()
ROW_DATA=()
ROW_ARGS=()
ROW_GEN=()
ROW_AVG=()
ROW_TOKENS=()
ROW_EVAL=()

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

q() { printf '%q' "$1"; }

_usage() {  # the calling script's header comment, then the options shared by all tables
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  echo
  awk '/^# Options/ { on = 1 } on && /^$/ { exit } on { sub(/^# ?/, ""); print }' "$RECIPES_LIB/common.sh"
}

recipe_init() {
  TABLE="$1"; shift
  DRY_RUN=0; CHECK_ONLY=0; MICRO=0; ONLY_ROWS=""; ONLY_DATASETS=""
  DATA_ROOT="${DATA_ROOT:-data}"; WORK=""
  GPUS=""; NODES=1; NODE_RANK=0; MASTER_ADDR=127.0.0.1; MASTER_PORT=29500; CPU_PROCS=0; FP16=1; MAX_TOKENS=""
  COMET_MODEL=""; COMET_PYTHON=""; BLEURT_MODEL=""; BLEURT_PYTHON=""
  LAUNCHER=local; SLURM_ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --dry-run) DRY_RUN=1 ;;
      --check) CHECK_ONLY=1 ;;
      --micro) MICRO=1 ;;
      --rows) ONLY_ROWS="$2"; shift ;;
      --datasets) ONLY_DATASETS="$2"; shift ;;
      --data-root) DATA_ROOT="$2"; shift ;;
      --work) WORK="$2"; shift ;;
      --gpus) GPUS="$2"; shift ;;
      --no-fp16) FP16=0 ;;
      --max-tokens) MAX_TOKENS="$2"; shift ;;
      --nodes) NODES="$2"; shift ;;
      --node-rank) NODE_RANK="$2"; shift ;;
      --master-addr) MASTER_ADDR="$2"; shift ;;
      --master-port) MASTER_PORT="$2"; shift ;;
      --cpu-procs) CPU_PROCS="$2"; shift ;;
      --launcher) LAUNCHER="$2"; shift ;;
      # The jobs' flags, declared in posnet_fairseq/launcher/flags.py, go to table_runs/slurm.py.
      --cpus-per-job|--partition|--time|--sbatch|--poll-seconds) SLURM_ARGS+=("$1" "$2"); shift ;;
      --comet-model) COMET_MODEL="$2"; shift ;;
      --comet-python) COMET_PYTHON="$2"; shift ;;
      --bleurt-model) BLEURT_MODEL="$2"; shift ;;
      --bleurt-python) BLEURT_PYTHON="$2"; shift ;;
      -h|--help) _usage; exit 0 ;;
      *) die "unknown option $1 (see --help)" ;;
    esac
    shift
  done
  case "$LAUNCHER" in local|slurm) ;; *) die "--launcher $LAUNCHER: expected local or slurm" ;; esac
  if [ "$LAUNCHER" = local ] && [ "${#SLURM_ARGS[@]}" -gt 0 ]; then die "${SLURM_ARGS[0]} goes with --launcher slurm"; fi
  if [ -z "$GPUS" ]; then
    if [ -n "${POSNET_RECIPE_GPUS:-}" ]; then GPUS="$POSNET_RECIPE_GPUS"
    elif [ "$LAUNCHER" = slurm ] && [ "$MICRO" = 0 ] && [ "$CPU_PROCS" = 0 ]; then
      die "--launcher slurm: give --gpus N, the GPUs per node of each training job (the GPUs here say nothing about the cluster's)"
    elif [ "$MICRO" = 1 ] || [ "$CPU_PROCS" -gt 0 ] 2>/dev/null; then GPUS=0
    else GPUS="$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)"
    fi
  fi
  for n in GPUS NODES NODE_RANK CPU_PROCS; do
    [[ "${!n}" =~ ^[0-9]+$ ]] || die "--$(echo "$n" | tr 'A-Z_' 'a-z-') ${!n}: expected a number"
  done
  if [ -n "$MAX_TOKENS" ] && ! [[ "$MAX_TOKENS" =~ ^[1-9][0-9]*$ ]]; then die "--max-tokens $MAX_TOKENS: expected a number"; fi
  if [ "$GPUS" = 0 ] && [ "$NODES" -gt 1 ]; then die "--nodes $NODES needs GPUs (--gpus N per node)"; fi
  # Mixed precision where the papers trained: on GPUs (never for the CPU runs).
  if [ "$GPUS" = 0 ] || [ "$MICRO" = 1 ] || [ "$CPU_PROCS" -gt 0 ]; then FP16=0; fi
  [ "$NODES" -ge 1 ] || die "--nodes $NODES: at least 1"
  if [ "$CPU_PROCS" -gt 0 ] && [ "$NODES" -gt 1 ]; then die "--cpu-procs and --nodes cannot be combined"; fi
  WORK="${WORK:-work/$TABLE}"
  # A dry run writes nothing: the work directory is only named (absolute), not made.
  case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
  [ "$DRY_RUN" = 1 ] || { mkdir -p "$WORK"; WORK="$(cd "$WORK" && pwd)"; }
  if [ "$MICRO" = 1 ]; then DATA_ROOT="$WORK/data"; fi
  case "$DATA_ROOT" in /*) ;; *) DATA_ROOT="$PWD/$DATA_ROOT" ;; esac
}

world_size() {
  if [ "$CPU_PROCS" -gt 0 ]; then echo "$CPU_PROCS"; elif [ "$GPUS" = 0 ]; then echo 1; else echo $((GPUS * NODES)); fi
}

# row NAME DATASET FLAGS...: one model of the table, as table_runs/rows.py prints it. GEN
# (generation flags), EVAL (flags of posnet_fairseq.evaluation.evaluate, e.g. --meteor),
# AVG ("best N": checkpoint_best.pt and the N-1 update checkpoints after it, else the last N;
# "last N": the last N update checkpoints; see posnet_fairseq/cli/average_checkpoints.py)
# and TOKENS (tokens per update, reached with --update-freq) are taken as
# they are set before the row (table_runs/table.py, Settings).
row() {
  local name="$1" dataset="$2"; shift 2
  ROW_NAMES+=("$name"); ROW_DATA+=("$dataset")
  ROW_ARGS+=("$(printf '%q ' "$@")")
  ROW_GEN+=("$(printf '%q ' "${GEN[@]}")")
  ROW_AVG+=("$AVG"); ROW_TOKENS+=("$TOKENS")
  if [ "${#EVAL[@]}" -gt 0 ]; then ROW_EVAL+=("$(printf '%q ' "${EVAL[@]}")"); else ROW_EVAL+=(""); fi
}

# Dataset conventions that the plan needs before the data exist. The test sets the papers
# report: WMT18 En-Zh is scored on newstest2017 (split test; the data recipe also builds
# newstest2018 as test1, which no table reports).
dataset_splits() { echo "test"; }
dataset_post_process() {
  case "$1" in wmt18_en_zh) echo "--post-process sentencepiece" ;; synth) echo "--post-process none" ;; *) echo "--remove-bpe" ;; esac
}

# --micro mode: tiny dims, a few updates, CPU, on the synthetic corpus. Its sentences have at most
# 30 tokens; the limit of 32 positions and the valid pair of more than 40 tokens
# (prepare-synth.sh --long-valid) reproduce what real data do to the models' 128-position limit.
MICRO_FLAGS=(--encoder-embed-dim 16 --decoder-embed-dim 16 --encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32
  --encoder-attention-heads 2 --decoder-attention-heads 2 --max-update 4 --save-interval-updates 2
  --warmup-updates 2 --max-tokens 1000 --max-source-positions 32 --max-target-positions 32
  --cpu --num-workers 0 --no-epoch-checkpoints)
MICRO_GEN=(--beam 2 --max-len-a 1 --max-len-b 10 --cpu)

_selected() {
  local name="$1" ds="$2"
  { [ -z "$ONLY_ROWS" ] || [[ ",$ONLY_ROWS," == *",$name,"* ]]; } &&
    { [ -z "$ONLY_DATASETS" ] || [[ ",$ONLY_DATASETS," == *",$ds,"* ]]; }
}

# _batch TOKENS ARGS: "FREQ PER_GPU CAP": the paper's TOKENS per update as WORLD x PER_GPU x FREQ with
# PER_GPU <= CAP (--max-tokens, else the row's --max-tokens): FREQ = ceil(TOKENS / (CAP x WORLD)),
# PER_GPU = ceil(TOKENS / (FREQ x WORLD)). A row without TOKENS keeps its --max-tokens and FREQ 1.
_batch() {
  local tokens="$1" args="$2" cap world freq
  cap="${MAX_TOKENS:-$(echo "$args" | sed -n 's/.*--max-tokens \([0-9]*\).*/\1/p')}"
  world="$(world_size)"
  if [ "$tokens" = 0 ] || [ -z "$cap" ]; then echo "1 ${cap:-0} ${cap:-0}"; return; fi
  freq=$(((tokens + cap * world - 1) / (cap * world)))
  echo "$freq $(((tokens + freq * world - 1) / (freq * world))) $cap"
}

# The datasets of the selected rows, each once.
_selected_datasets() {
  local i
  for i in "${!ROW_NAMES[@]}"; do
    _selected "${ROW_NAMES[$i]}" "${ROW_DATA[$i]}" && echo "${ROW_DATA[$i]}"
  done | awk '!seen[$0]++'
}

# posnet_fairseq/table_runs/datasets.py and rows.py, run as files: importing the package would load fairseq.
_datasets_py() { "$PYTHON" "$REPO_ROOT/posnet_fairseq/table_runs/datasets.py" "$@"; }

# The table's declaration (table_runs/<paper>.py) as `row` lines with their settings, BASELINES (the
# rows the others are tested against, paired bootstrap) and the table's additions to MICRO_FLAGS.
_load_rows() {
  local rows
  rows="$("$PYTHON" "$REPO_ROOT/posnet_fairseq/table_runs/rows.py" "$TABLE")" || die "no declaration of $TABLE (see above)"
  eval "$rows"
}

_train_prefix() {
  if [ "$CPU_PROCS" -gt 0 ]; then
    echo "$PYTHON -m posnet_fairseq.table_runs.launch --procs $CPU_PROCS -- fairseq-train"
  elif [ "$NODES" -gt 1 ] && [ "$LAUNCHER" = slurm ]; then
    # One task per node runs this line (table_runs/slurm.py): its rank and the first node come from SLURM.
    echo "torchrun --nnodes $NODES --node-rank \$SLURM_NODEID --nproc-per-node $GPUS --master-addr \$(scontrol show hostnames \$SLURM_JOB_NODELIST | head -n 1) --master-port $MASTER_PORT -m fairseq_cli.train"
  elif [ "$NODES" -gt 1 ]; then
    echo "torchrun --nnodes $NODES --node-rank $NODE_RANK --nproc-per-node $GPUS --master-addr $MASTER_ADDR --master-port $MASTER_PORT -m fairseq_cli.train"
  else
    echo "fairseq-train"
  fi
}

_distributed_flags() {
  if [ "$CPU_PROCS" -gt 0 ]; then
    local port=$((20000 + RANDOM % 20000))
    echo "--cpu --distributed-world-size $CPU_PROCS --distributed-backend gloo --distributed-init-method tcp://127.0.0.1:$port --distributed-no-spawn --ddp-backend legacy_ddp"
  elif [ "$NODES" -eq 1 ] && [ "$GPUS" -gt 1 ]; then
    echo "--distributed-world-size $GPUS"
  fi
}

emit_plan() {
  local i name ds data conv save res split avg count rule freq per_gpu cap args micro="" b
  echo "#!/usr/bin/env bash"
  echo "# plan of $TABLE ($(date -u +%Y-%m-%dT%H:%M:%SZ)); world size $(world_size)"
  if [ "$CPU_PROCS" -gt 0 ]; then echo "# training: $CPU_PROCS CPU processes (gloo)"
  elif [ "$GPUS" = 0 ]; then echo "# training: no GPU found, on the CPU in fp32 (slow: the papers trained on GPUs)"
  else echo "# training: $NODES node(s) x $GPUS GPU(s), $([ "$FP16" = 1 ] && echo "mixed precision (--fp16; --no-fp16 for fp32)" || echo "fp32 (--no-fp16)")"
  fi
  echo "set -euo pipefail"
  echo "export PYTHONPATH=$(q "$REPO_ROOT")\${PYTHONPATH:+:\$PYTHONPATH}"
  if [ "$MICRO" = 1 ]; then
    micro="$(printf '%q ' "${MICRO_FLAGS[@]}")"
    echo "bash $(q "$REPO_ROOT/recipes/data/prepare-synth.sh") --out $(q "$DATA_ROOT/synth") --long-valid 40"
  else
    # The paper's values of each dataset, which --check and the run verify in its stats.json.
    _datasets_py describe $(_selected_datasets) | sed 's/^/# dataset /'
  fi
  for i in "${!ROW_NAMES[@]}"; do
    name="${ROW_NAMES[$i]}"; ds="${ROW_DATA[$i]}"
    _selected "$name" "$ds" || continue
    data="$DATA_ROOT/$ds"; conv="$ds"
    if [ "$MICRO" = 1 ]; then data="$DATA_ROOT/synth"; conv=synth; fi
    save="$WORK/$name/$ds/checkpoints"; res="$WORK/results/$name/$ds"
    read -r freq per_gpu cap <<<"$(_batch "${ROW_TOKENS[$i]}" "${ROW_ARGS[$i]}")"
    args="$(echo "${ROW_ARGS[$i]}" | sed "s/--max-tokens [0-9]*/--max-tokens $per_gpu/")"
    [ "$MICRO" = 1 ] && freq=1
    echo ""
    echo "# row $name $ds"
    echo "mkdir -p $(q "$save")"
    [ "$MICRO" = 1 ] || [ "${ROW_TOKENS[$i]}" = 0 ] || echo "# batch: $(world_size) x $per_gpu tokens x update-freq $freq = $(($(world_size) * per_gpu * freq)) tokens per update (the paper's ~${ROW_TOKENS[$i]}; at most $cap per GPU)"
    # Valid sets keep sentences longer than the models' --max-*-positions (cleaned to 250 tokens):
    # fairseq skips those in validation only with --skip-invalid-size-inputs-valid-test.
    echo "$(_train_prefix) $(q "$data/data-bin") --user-dir $(q "$PLUGIN_DIR") --save-dir $(q "$save") ${args}--update-freq $freq$([ "$FP16" = 1 ] && echo " --fp16") --skip-invalid-size-inputs-valid-test --log-format simple --log-file $(q "$save/train.log") $micro$(_distributed_flags)"
    # Only the first node averages, decodes and scores.
    [ "$NODE_RANK" = 0 ] || continue
    read -r avg count <<<"${ROW_AVG[$i]}"
    [ "$MICRO" = 1 ] && count=2
    case "$avg" in
      best) rule="--best-and-following $count" ;;
      last) rule="--num-update-checkpoints $count" ;;
      *) die "row $name: AVG=\"${ROW_AVG[$i]}\": expected 'best N' or 'last N'" ;;
    esac
    echo "$PYTHON -m posnet_fairseq.cli.average_checkpoints --inputs $(q "$save") --output $(q "$save/averaged.pt") $rule"
    for split in $(dataset_splits "$conv"); do
      echo "mkdir -p $(q "$res/$split")"
      # --required-batch-size-multiple 1: fairseq's default of 8 is for training; every test sentence
      # is translated. Sentences over the model's maximum length are skipped (and scored as empty).
      # Its log (stderr) holds fairseq's timing of the translation; shown when generation fails.
      echo "fairseq-generate $(q "$data/data-bin") --user-dir $(q "$PLUGIN_DIR") --path $(q "$save/averaged.pt") --gen-subset $split ${ROW_GEN[$i]}--required-batch-size-multiple 1 --skip-invalid-size-inputs-valid-test $(dataset_post_process "$conv")$([ "$MICRO" = 1 ] && printf ' %q' "${MICRO_GEN[@]}") > $(q "$res/$split/generate.txt") 2> $(q "$res/$split/generate.log") || { tail -n 30 $(q "$res/$split/generate.log") >&2; exit 1; }"
      local extra=" --generate-log $(q "$res/$split/generate.log") --train-log $(q "$save/train.log")"
      for b in $BASELINES; do
        [ "$b" = "$name" ] || extra+=" --baseline $b=$(q "$WORK/results/$b/$ds/$split")"
      done
      [ -n "$COMET_MODEL$COMET_PYTHON" ] && extra+=" --comet-model $(q "$COMET_MODEL") --comet-python $(q "$COMET_PYTHON")"
      [ -n "$BLEURT_MODEL$BLEURT_PYTHON" ] && extra+=" --bleurt-model $(q "$BLEURT_MODEL") --bleurt-python $(q "$BLEURT_PYTHON")"
      echo "$PYTHON -m posnet_fairseq.evaluation.evaluate --generate-output $(q "$res/$split/generate.txt") --stats $(q "$data/stats.json") --split $split --out-dir $(q "$res/$split") --row $name --checkpoint $(q "$save/averaged.pt") ${ROW_EVAL[$i]}$extra"
    done
  done
  [ "$NODE_RANK" = 0 ] || return 0
  echo ""
  echo "# table"
  echo "$PYTHON -m posnet_fairseq.evaluation.tables collect $TABLE --results $(q "$WORK/results") --out $(q "$WORK/$TABLE")"
}

run_table() {
  _load_rows
  if [ -n "$ONLY_ROWS" ]; then
    local r
    for r in ${ONLY_ROWS//,/ }; do
      [[ " ${ROW_NAMES[*]} " == *" $r "* ]] || die "--rows: no row $r in $TABLE (rows: $(printf '%s ' "${ROW_NAMES[@]}" | tr ' ' '\n' | sort -u | tr '\n' ' '))"
    done
  fi
  if [ -n "$ONLY_DATASETS" ]; then
    local d
    for d in ${ONLY_DATASETS//,/ }; do
      [[ " ${ROW_DATA[*]} " == *" $d "* ]] || die "--datasets: no row of $TABLE is on $d (datasets: $(printf '%s ' "${ROW_DATA[@]}" | tr ' ' '\n' | sort -u | tr '\n' ' '))"
    done
  fi
  if [ "$DRY_RUN" = 1 ] && [ "$LAUNCHER" = slurm ]; then emit_plan | _slurm - --dry-run; return 0; fi
  if [ "$DRY_RUN" = 1 ]; then emit_plan; return 0; fi
  local plan="$WORK/plan.sh"
  emit_plan > "$plan"
  PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m posnet_fairseq.table_runs.plancheck "$plan" \
    || die "not started: the plan $plan names something that does not exist (see above)"
  if [ "$MICRO" != 1 ]; then
    _datasets_py check --data-root "$DATA_ROOT" $(_selected_datasets) \
      || die "not started: a dataset under $DATA_ROOT is missing or not the one the paper used (see above)"
  fi
  [ "$CHECK_ONLY" = 1 ] && return 0
  if [ "$LAUNCHER" = slurm ]; then echo "submitting $plan" >&2; _slurm "$plan"; return; fi
  echo "running $plan" >&2
  bash "$plan"
}

# The plan as SLURM jobs (posnet_fairseq/table_runs/slurm.py): PLAN [--dry-run].
_slurm() {
  PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m posnet_fairseq.table_runs.slurm "$@" --work "$WORK" \
    --gpus "$GPUS" --nodes "$NODES" ${SLURM_ARGS[@]+"${SLURM_ARGS[@]}"}
}
