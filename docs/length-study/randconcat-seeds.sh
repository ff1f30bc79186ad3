#!/usr/bin/env bash
# docs/length-generalisation.md, "Randomized positions with concatenated examples", 3 seeds: RoPE trained with
# randomized positions and concatenated examples, translated with spread test positions, against the Transformer.
# Seed 1 of both comes from randconcat-synthetic.sh's run, the Transformer's seeds 2 and 3 from the verdict run (a)
# (docs/compare/verdict-synthetic.sh), taken with --reuse-from: only the combination's seeds 2 and 3 train.
# Results: randconcat-seeds/.
RANDOMIZED="--encoder-position-augmentation randomized --decoder-position-augmentation randomized"
CONCAT="--task translation_concat --concat-max-pairs 3 --concat-rate 0.5"
SPREAD="--model-overrides '{\"randomized_test_positions\": \"spread\"}'"
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rope_transformer_tiny+randconcat \
  --arch-flags "rope_transformer_tiny+randconcat=$RANDOMIZED $CONCAT" \
  --arch-generate-flags "rope_transformer_tiny+randconcat=$SPREAD" \
  --seeds 3 --train-max-len 20 --test-max-len 50 --budget converge:40e --jobs 1 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --reuse-from runs/randconcat-synthetic --reuse-from runs/verdict-synthetic --out runs/randconcat-seeds
