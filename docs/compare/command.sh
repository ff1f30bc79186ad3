#!/usr/bin/env bash
# The run shown in docs/compare.md (from the checkout; while posnet-compare is not installed as a
# console script, `python -m posnet_fairseq.cli.compare` is the same command).
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,rposnet_transformer_tiny,aposnet_transformer_tiny,glinearnet_transformer_tiny,lightconv_apptek_transformer_tiny,shaw_transformer_tiny,hc_gaussian_tiny,hc_gaussian_shx_tiny,aan_plus_avg_tiny,tisa_transformer_tiny \
  --budget 150u --warmup-updates 100 --interval 25 --average 2 \
  --decode-sentences 16 --decode-rounds 2 --step-rounds 1 \
  --out runs/compare
