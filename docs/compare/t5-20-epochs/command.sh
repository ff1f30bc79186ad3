#!/usr/bin/env bash
# T5 bias beside the Transformer at four times the budget of the early run of every family (20 epochs;
# docs/compare/t5-20-epochs/README.md).
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,t5bias_transformer_tiny \
  --budget 20e --jobs 1 \
  --decode-sentences 8 --decode-rounds 1 --step-rounds 1 --timed-steps 2 --decode-lengths 30 \
  --out runs/compare-t5
