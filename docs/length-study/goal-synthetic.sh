#!/usr/bin/env bash
# docs/length-generalisation.md, "The goal, with seeds": the Transformer with and without concatenated training
# examples on the synthetic corpus, 3 seeds, each trained until its validation loss stops improving (at most 40
# epochs), two trainings at a time. The same command in the same --out resumes.
bash recipes/compare/length-study.sh --corpus synthetic --out runs/length-goal --models posnet_transformer_tiny+concat \
  --seeds 3 --budget converge:40e --jobs 2 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
