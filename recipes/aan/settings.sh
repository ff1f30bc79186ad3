# Training and decoding settings shared by the AAN+ tables (sourced after lib/common.sh):
# 300k updates of ~25k tokens (--max-tokens 4096 per GPU, --update-freq from the world size),
# Adam (0.9, 0.98), inverse-sqrt schedule with 4000 warm-up updates, label smoothing 0.1,
# post-norm layers (fairseq default, as the paper's Eq. 17), a checkpoint every 5000 updates
# and the last 5 averaged, beam 4, length penalty 0.6. Base models: lr 7e-4 (not in the notes:
# fairseq's base setting), dropout 0.1.
COMMON=(--share-all-embeddings --optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0
        --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-07
        --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
        --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
BASE_OPT=(--lr 0.0007 --dropout 0.1 "${COMMON[@]}")
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6 --batch-size 64)

# aan_rows DATASET SUFFIX [flags...]: the Transformer, the 2018 AAN and AAN+ with each
# pattern, as rows NAME$SUFFIX of architecture NAME$SUFFIX (the Transformer: BASE_ARCH).
aan_rows() {
  local ds=$1 suffix=$2; shift 2
  row "transformer$suffix" "$ds" --arch "$BASE_ARCH" "$@"
  local name
  for name in aan aan_plus_avg aan_plus_ner aan_plus_far aan_plus_wet; do
    row "$name$suffix" "$ds" --arch "$name$suffix" "$@"
  done
}
