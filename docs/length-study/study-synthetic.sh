#!/usr/bin/env bash
# docs/length-generalisation.md, "The study": the synthetic corpus (train <= 20 words, test up to 50), one seed,
# every model trained until its validation loss stops improving (at most 40 epochs), in stages: each stage adds
# models to the same run (only the new ones train) and writes its results.md. synthetic-seed1/ holds
# the latest stage's. The same command in the same --out resumes. The models that the verdict run (a)
# (docs/compare/verdict-synthetic.sh) trained with seed 1 are taken from it (--reuse-from), not trained again.
set -e
stage() {
  bash recipes/compare/length-study.sh --corpus synthetic --out runs/length-study --models "$1" \
    --budget converge:40e --jobs 1 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
    --reuse-from runs/verdict-synthetic
}
S1=posnet_transformer_tiny+concat,aposnet_transformer_tiny,rposnet_transformer_tiny
S2=$S1,rope_transformer_tiny,rope_transformer_tiny+yarn
S3=$S2,aposnet_transformer_tiny+concat,posnet_transformer_tiny+shape,rope_transformer_tiny+concat
S4=$S3,alibi_seq2seq_transformer_tiny,fire_transformer_tiny,dpb_transformer_tiny
stage "$S1"
stage "$S2"
stage "$S3"
S5=$S4,posnet_transformer_tiny+randomized,rope_transformer_tiny+randomized
stage "$S4"
stage "$S5"
stage ""  # the whole grid
