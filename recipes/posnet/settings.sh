# The PosNet paper's base-model settings shared by its tables (sourced after lib/common.sh):
# 150k updates of ~27k tokens (--max-tokens 4500 per GPU, --update-freq from the world size),
# Adam (0.9, 0.98), inverse-sqrt schedule with 4000 warm-up updates, lr 7e-4 (not in the notes:
# fairseq's base setting), dropout 0.1, label smoothing 0.1, sentences of at most 128 tokens,
# a checkpoint every 1000 updates and the 7 around the best validation perplexity averaged,
# beam 12. --share-all-embeddings is left to each table: Table 2's En-Zh has separate
# vocabularies.
BASE_OPT=(--optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr 0.0007 --lr-scheduler inverse_sqrt
          --warmup-updates 4000 --warmup-init-lr 1e-07 --dropout 0.1
          --criterion label_smoothed_cross_entropy --label-smoothing 0.1
          --max-update 150000 --max-tokens 4500 --max-source-positions 128 --max-target-positions 128
          --save-interval-updates 1000 --keep-interval-updates 21 --no-epoch-checkpoints --seed 1)
TOKENS=27000; AVG="best 7"
GEN=(--beam 12 --lenpen 1.0 --batch-size 64)
