"""``posnet-compare``: which position mechanism, at what cost, from one run.

    posnet-compare --archs A,B,... [--data DATA_BIN --post-process SPM | --raw SRC TGT
        [--raw-valid SRC TGT] [--raw-test SRC TGT]] [--budget 5e|2000u|20m|converge:40e] [--seeds N]
        [--train-max-len L] --out DIR

Trains every architecture with the same seeds, optimiser and budget (on the
CPU side by side, one core each; with GPUs one model per GPU, fp16),
translates the test set, and writes ``DIR/results.md`` (one table),
``DIR/results.csv`` and ``DIR/plots/*.png``:

* quality: sacreBLEU BLEU and chrF with signatures, 95% bootstrap confidence
  intervals and paired significance against the first architecture (with
  several seeds: mean ± sd over them), and a verdict per model that counts the
  seed variance;
* length generalisation: BLEU per source-length bucket, buckets beyond the
  training lengths marked, buckets of fewer than ``--min-bucket-sentences``
  merged into a neighbour or marked too small. The default synthetic corpus trains on pairs of at
  most ``--train-max-len`` tokens (20) and tests up to 2.5 times that;
  with ``--raw``, ``--train-max-len`` filters the training pairs and the
  longer test sentences form the extrapolation buckets;
* cost: parameters (and after PosNet precomputation), training tokens/s and
  step memory, decoding speed at forced output lengths, as ratios to the
  first architecture measured in the same run;
* plots: BLEU vs decoding speed, BLEU by length (a model x bucket map), validation loss
  per model beside the baseline, each model's mean self-attention weight by position
  offset (``posnet-analyze``'s figures per model under ``DIR/analysis/``).

Re-running the same command skips what is finished (the log says
"skipped") and resumes an interrupted training from its last checkpoint.
The work is done by :mod:`posnet_fairseq.compare` (this module is its entry
point). See docs/compare.md.
"""
import logging
import os
import sys

from . import interruption


def main(argv=None):
    # Warnings only (matplotlib's and fairseq's INFO/DEBUG lines stay out) unless LOGLEVEL asks for more.
    logging.basicConfig(level=os.environ.get("LOGLEVEL", "WARNING").upper())
    from ..compare import options

    parser = options.build_parser(description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    args = options.check_args(parser, parser.parse_args(argv))
    from ..compare import run  # after the checks: a wrong flag is told before torch and matplotlib load

    # SIGTERM unwinds like Ctrl-C, so running trainings and translations are stopped, not orphaned; then one
    # line and exit status 130 / 143.
    return interruption.run("posnet-compare", lambda: run.run(parser, args, argv), resumes=True)


if __name__ == "__main__":
    sys.exit(main())
