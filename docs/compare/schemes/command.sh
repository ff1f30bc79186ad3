#!/usr/bin/env bash
# The converged run of docs/compare.md ("The position schemes beside the papers' mechanisms"), from the
# checkout; it ran in parts (interrupted and resumed in the same --out, see compare.log): the models
# were trained one at a time and the cost settings lightened before the cost step.
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rposnet_transformer_tiny,aan_plus_avg_tiny,hc_gaussian_tiny,rope_transformer_tiny,alibi_transformer_tiny,t5bias_transformer_tiny,kerple_transformer_tiny,nope_transformer_tiny \
  --budget 5e --jobs 1 \
  --decode-sentences 8 --decode-rounds 1 --step-rounds 1 --timed-steps 2 \
  --out runs/compare-schemes
