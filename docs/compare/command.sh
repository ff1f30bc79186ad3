#!/usr/bin/env bash
# The early run of every family (docs/compare/README.md), from the checkout: every
# mechanism family of posnet_fairseq.benchmark.FAMILIES at tiny size, 5 epochs each. It ran in two
# parts in the same --out (the cost step was re-run after an interruption, see compare.log).
OMP_NUM_THREADS=1 posnet-compare \
  --archs posnet_transformer_tiny,transformer_nosa_tiny,rposnet_transformer_tiny,aposnet_transformer_tiny,shaw_transformer_tiny,relattn_transformer_tiny,glinearnet_transformer_tiny,fouriernet_transformer_tiny,lightconv_apptek_transformer_tiny,hc_gaussian_tiny,hc_gaussian_shx_tiny,aan_plus_avg_tiny,aan_plus_ner_tiny,aan_plus_far_tiny,aan_plus_wet_tiny,ssru_tiny,linear_attention_tiny,tisa_transformer_tiny,rope_transformer_tiny,alibi_transformer_tiny,t5bias_transformer_tiny,kerple_transformer_tiny,nope_transformer_tiny \
  --budget 5e --jobs 2 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2 \
  --out runs/compare
