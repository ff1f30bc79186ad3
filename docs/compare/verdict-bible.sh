#!/usr/bin/env bash
# docs/compare.md, "The verdict runs", run (b): the Bible corpus Es->En (recipes/data/prepare-bible-es-en.sh),
# the recipe's eight families at tiny size trained on pairs of at most 32 pieces, tested on the held-out
# books and on runs of 4 consecutive test verses joined (--concat-test 4); 3 seeds, converged (at most 40
# epochs). The same command in the same --out resumes it. It ran with --jobs 1 until 19:52 UTC on 2026-11-26,
# then --jobs 2 (two models at a time, one core each: --jobs changes no result).
bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
bash recipes/compare/bible-es-en.sh --data data/bible_es_en --out runs/verdict-bible \
  --seeds 3 --budget converge:40e --jobs 2 \
  --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
