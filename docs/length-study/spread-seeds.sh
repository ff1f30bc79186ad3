#!/usr/bin/env bash
# docs/length-generalisation.md, "Spread test positions", two seeds: RoPE trained with randomized positions,
# translated with the plain and with spread test positions (--randomized-test-positions spread, given at
# generation as --model-overrides), against the Transformer and RoPE, seeds 1 and 2. Only RoPE + randomized
# seed 2 trains: seed 1 of every model is the study's (docs/length-study/study-synthetic.sh), the Transformer's
# and RoPE's seed 2 the verdict run (a)'s (docs/compare/verdict-synthetic.sh), taken with --reuse-from; the
# +spread models share the training of their +randomized twins. Results: spread-seeds/.
RANDOMIZED="--encoder-position-augmentation randomized --decoder-position-augmentation randomized"
SPREAD="--model-overrides '{\"randomized_test_positions\": \"spread\"}'"
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rope_transformer_tiny,rope_transformer_tiny+randomized,rope_transformer_tiny+spread \
  --arch-flags "rope_transformer_tiny+randomized=$RANDOMIZED" --arch-flags "rope_transformer_tiny+spread=$RANDOMIZED" \
  --arch-generate-flags "rope_transformer_tiny+spread=$SPREAD" \
  --seeds 2 --train-max-len 20 --test-max-len 50 --budget converge:40e --jobs 1 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --reuse-from runs/length-study/synthetic --reuse-from runs/verdict-synthetic --out runs/spread-seeds
