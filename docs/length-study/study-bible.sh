#!/usr/bin/env bash
# docs/length-generalisation.md, "On real text": the Transformer with and without concatenated training examples on
# the Bible corpus (Es->En, training pairs of at most 32 pieces, test verses and runs of 4 joined), RoPE with
# concatenated examples, with both remedies (and spread test positions) and with YaRN by source length, and the
# grid's schemes that the verdict run (b) trains (RoPE, ALiBi, aPosNet, rPosNet), one seed, each trained until its
# validation loss stops improving (at most 40 epochs). The Transformer and the schemes alone are the verdict run
# (b)'s seed-1 models (docs/compare/verdict-bible.sh), taken by --reuse-from. The same command in the same --out
# resumes.
bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
bash recipes/compare/length-study.sh --corpus bible --data data/bible_es_en --out runs/length-study \
  --models posnet_transformer_tiny+concat,rope_transformer_tiny,rope_transformer_tiny+yarn,rope_transformer_tiny+concat,rope_transformer_tiny+randconcat,alibi_transformer_tiny,aposnet_transformer_tiny,rposnet_transformer_tiny \
  --reuse-from runs/verdict-bible \
  --budget converge:40e --jobs 1 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
