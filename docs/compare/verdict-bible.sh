#!/usr/bin/env bash
# Verdict run (b) (docs/compare/verdict-bible/README.md): the Bible corpus Es->En (recipes/data/prepare-bible-es-en.sh),
# the recipe's eight families at tiny size trained on pairs of at most 32 pieces, tested on the held-out
# books and on runs of 4 consecutive test verses joined (--concat-test 4); 3 seeds, converged (at most 40
# epochs). The same command in the same --out resumes it; --jobs changes no result. Its first attempt
# (2026-11-26, --seeds 3 at once) was lost with the machine it ran on; the second (from 02:46 UTC on
# 2026-11-27) runs one seed a stage (--seeds 1, then 2, then 3): each stage ends with its seed's
# translation (and, in the first, the cost and analysis), so --delete-checkpoints frees that seed's
# checkpoints (about 3.5 GB) and a lost machine loses only the seed in training.
bash recipes/data/prepare-bible-es-en.sh --out data/bible_es_en
for seeds in 1 2 3; do
  bash recipes/compare/bible-es-en.sh --data data/bible_es_en --out runs/verdict-bible \
    --seeds "$seeds" --budget converge:40e --jobs 2 --delete-checkpoints \
    --decode-sentences 8 --decode-rounds 2 --step-rounds 1 --timed-steps 2
done
