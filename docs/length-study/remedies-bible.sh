#!/usr/bin/env bash
# The length remedies over three seeds on real text (issue 47, item 7; docs/length-generalisation.md): the
# Transformer, the Transformer with concatenated training examples, RoPE with them, and RoPE with both remedies
# (randomized positions and concatenated examples, spread test positions), on the Bible corpus, three seeds
# each, each trained until its validation loss stops improving (at most 40 epochs). The Transformer's three
# models are taken from the A/A run (docs/compare/aa-bible.sh) by --reuse-from, so run that first and keep its
# checkpoints. The same command in the same --out resumes it.
bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
bash recipes/compare/length-study.sh --corpus bible --data data/bible_es_en --out runs/remedies \
  --models posnet_transformer_tiny+concat,rope_transformer_tiny+concat,rope_transformer_tiny+randconcat \
  --reuse-from runs/aa-bible --seeds 3 \
  --budget converge:40e --jobs 2 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
