#!/usr/bin/env bash
# Verdict run (a) (docs/compare/verdict-synthetic/README.md): the synthetic corpus (train <= 20 words, test up to 50),
# eight families at tiny size, 3 seeds each, trained until the validation loss stops improving (at most
# 40 epochs). The same command in the same --out resumes it.
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rposnet_transformer_tiny,aposnet_transformer_tiny,hc_gaussian_tiny,aan_plus_avg_tiny,tisa_transformer_tiny,rope_transformer_tiny,alibi_transformer_tiny \
  --seeds 3 --budget converge:40e --jobs 1 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --out runs/verdict-synthetic
