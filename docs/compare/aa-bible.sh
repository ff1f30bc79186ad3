#!/usr/bin/env bash
# The A/A check on real text (issue 47, item 6; docs/verdict-calibration.md): the Transformer against itself
# under another label, posnet_transformer_tiny+aa, with the same flags and other seeds (--seed-offset 3: the
# seeds 4, 5, 6 against 1, 2, 3), on the Bible corpus, three seeds each, each trained until its validation
# loss stops improving (at most 40 epochs). Every verdict of its report must read "no detectable difference".
# The Transformer's models are those of the verdict run (b) (the same flags and seeds, trained again: its
# checkpoints were deleted). Started on 2026-11-27 at 22:06 UTC on the 2-core session machine, beside the
# session's other work; the same command in the same --out resumes it.
bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
bash recipes/compare/bible-es-en.sh --data data/bible_es_en --out runs/aa-bible \
  --archs posnet_transformer_tiny,posnet_transformer_tiny+aa --seed-offset posnet_transformer_tiny+aa=3 \
  --seeds 3 --budget converge:40e --jobs 2 --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
