#!/usr/bin/env bash
# docs/compare.md, run (b), its seed 1 (while seeds 2 and 3 train): the eight families' seed-1 models of the
# verdict run (docs/compare/verdict-bible.sh), taken by --reuse-from, translated and reported as a one-seed run
# (its verdict ignores seed variance). Run it when seed 1 has finished there.
bash recipes/compare/bible-es-en.sh --data data/bible_es_en --out runs/verdict-bible-seed1 \
  --reuse-from runs/verdict-bible --budget converge:40e --jobs 2 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
