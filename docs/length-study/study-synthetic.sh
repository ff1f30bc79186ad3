#!/usr/bin/env bash
# docs/length-generalisation.md, "The study": the synthetic corpus (train <= 20 words, test up to 50), one seed,
# every model trained until its validation loss stops improving (at most 40 epochs), in stages: each stage adds
# models to the same run (only the new ones train) and writes its results.md. The first stage's results are
# synthetic-seed1/. The same command in the same --out resumes.
set -e
stage() {
  bash recipes/compare/length-study.sh --corpus synthetic --out runs/length-study --models "$1" \
    --budget converge:40e --jobs 1 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
}
S1=posnet_transformer_tiny+concat,aposnet_transformer_tiny,rposnet_transformer_tiny
S2=$S1,rope_transformer_tiny,rope_transformer_tiny+yarn
S3=$S2,aposnet_transformer_tiny+concat,posnet_transformer_tiny+shape,rope_transformer_tiny+concat
S4=$S3,alibi_seq2seq_transformer_tiny,fire_transformer_tiny,dpb_transformer_tiny
stage "$S1"
stage "$S2"
stage "$S3"
stage "$S4"
stage ""  # the whole grid
