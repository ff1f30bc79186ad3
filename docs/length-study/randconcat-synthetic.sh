#!/usr/bin/env bash
# docs/length-generalisation.md, "Randomized positions with concatenated examples": RoPE trained with both
# remedies at once (randomized positions on both sides, 2..3 pairs joined in half of the examples) and translated
# with spread test positions, one seed, beside RoPE with each remedy alone. Only the combination trains: the
# other models are the study's (docs/length-study/study-synthetic.sh), taken with --reuse-from; +spread shares
# the training of +randomized. Results: randconcat-synthetic/.
RANDOMIZED="--encoder-position-augmentation randomized --decoder-position-augmentation randomized"
CONCAT="--task translation_concat --concat-max-pairs 3 --concat-rate 0.5"
SPREAD="--model-overrides '{\"randomized_test_positions\": \"spread\"}'"
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rope_transformer_tiny+concat,rope_transformer_tiny+randomized,rope_transformer_tiny+spread,rope_transformer_tiny+randconcat \
  --arch-flags "rope_transformer_tiny+concat=$CONCAT" \
  --arch-flags "rope_transformer_tiny+randomized=$RANDOMIZED" --arch-flags "rope_transformer_tiny+spread=$RANDOMIZED" \
  --arch-flags "rope_transformer_tiny+randconcat=$RANDOMIZED $CONCAT" \
  --arch-generate-flags "rope_transformer_tiny+spread=$SPREAD" --arch-generate-flags "rope_transformer_tiny+randconcat=$SPREAD" \
  --train-max-len 20 --test-max-len 50 --budget converge:40e --jobs 1 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --reuse-from runs/length-study/synthetic --out runs/randconcat-synthetic
