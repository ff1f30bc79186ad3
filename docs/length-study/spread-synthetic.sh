#!/usr/bin/env bash
# docs/length-generalisation.md, "Spread test positions": the study's two models trained with randomized
# positions (Transformer, RoPE), translated with the plain test positions and with spread ones
# (--randomized-test-positions spread, given at generation as --model-overrides). Nothing trains: every model
# is taken from the study's run (docs/length-study/study-synthetic.sh, stage 5) with --reuse-from, and the
# +spread models share the training of their +randomized twins. Results: spread-synthetic/.
RANDOMIZED="--encoder-position-augmentation randomized --decoder-position-augmentation randomized"
SPREAD="--model-overrides '{\"randomized_test_positions\": \"spread\"}'"
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,posnet_transformer_tiny+randomized,posnet_transformer_tiny+spread,rope_transformer_tiny,rope_transformer_tiny+randomized,rope_transformer_tiny+spread \
  --arch-flags "posnet_transformer_tiny+randomized=$RANDOMIZED" --arch-flags "posnet_transformer_tiny+spread=$RANDOMIZED" \
  --arch-flags "rope_transformer_tiny+randomized=$RANDOMIZED" --arch-flags "rope_transformer_tiny+spread=$RANDOMIZED" \
  --arch-generate-flags "posnet_transformer_tiny+spread=$SPREAD" --arch-generate-flags "rope_transformer_tiny+spread=$SPREAD" \
  --train-max-len 20 --test-max-len 50 --budget converge:40e --jobs 1 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --reuse-from runs/length-study/synthetic --out runs/spread-synthetic
