"""Training memory of position-based models against the Transformer.

You et al. (2020) report that hard-coded self-attention fits more tokens in a
training batch on a fixed GPU (HC-SA +17%, SH-X +26%). What grows with the
batch is the activation memory autograd keeps for the backward pass; what does
not is the weights, their gradients and Adam's two moments (16 bytes per
parameter in fp32). This benchmark measures both, for one training step
(forward, backward, Adam) at a fixed batch, each architecture in a fresh
subprocess:

* ``act KiB/token``: bytes of every tensor saved for backward (parameters
  excluded, each storage once), per target token. Deterministic.
* ``tokens@budget``: the tokens that fit in ``--budget-gib`` once the fixed
  16 bytes/parameter are paid, as a ratio to the reference.
* ``step MiB``: the resident memory the step adds on top of the built model
  (peak RSS reset after building). It also counts allocator slack and
  temporaries, so it is noisier.

    python -m posnet_fairseq.benchmark.memory --archs hc_gaussian,hc_gaussian_shx,transformer_nosa
    python -m posnet_fairseq.benchmark.memory --archs hc_gaussian_tiny --reference posnet_transformer_tiny

Every ratio is against ``--reference`` measured in the same run. The step is
:mod:`.training_step`'s (shared with ``posnet-compare`` and the speed benchmark).
"""
import argparse
import sys

from .training_step import measure_isolated


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m posnet_fairseq.benchmark.memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", default="hc_gaussian,hc_gaussian_shx,transformer_nosa",
                        help="comma-separated architectures to compare with --reference")
    parser.add_argument("--reference", default="posnet_transformer_base",
                        help="the Transformer measured in the same run (default: posnet_transformer_base)")
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch (default: 32)")
    parser.add_argument("--length", type=int, default=30, help="tokens per sentence, source and target (30)")
    parser.add_argument("--vocab", type=int, default=8000, help="joined vocabulary size (default: 8000)")
    parser.add_argument("--budget-gib", type=float, default=11.0,
                        help="memory budget for the tokens-per-batch estimate (default: 11, a 1080 Ti)")
    parser.add_argument("--flags", default="--length-ratio 1.0 --dropout 0.1",
                        help="extra model flags for every architecture, given as --flags=\"...\" "
                        "(default: a gamma for HC-ALL and dropout 0.1)")
    opts = parser.parse_args(argv)

    archs = [opts.reference] + [a for a in opts.archs.split(",") if a and a != opts.reference]
    rows = {arch: measure_isolated(arch, opts.batch, opts.length, opts.vocab, opts.flags.split()) for arch in archs}
    budget = opts.budget_gib * 2 ** 30
    for row in rows.values():
        row["per_token"] = row["saved_bytes"] / row["tokens"]
        row["fit"] = (budget - 16 * row["params"]) / row["per_token"]
        if not row["exact_peak"]:
            print(f"# {row['arch']}: peak RSS could not be reset; step MiB includes model construction",
                  file=sys.stderr)

    ref = rows[opts.reference]
    print(f"training step, {opts.batch} x {opts.length} tokens, vocab {opts.vocab}, budget {opts.budget_gib:g} GiB; "
          f"ratios against {opts.reference} measured in this run")
    print(f"{'arch':28s} {'params':>11s} {'act KiB/token':>13s} {'ratio':>6s} {'tokens@budget':>14s} "
          f"{'step MiB':>9s} {'ratio':>6s}")
    for arch in archs:
        row = rows[arch]
        print(f"{arch:28s} {row['params']:11,d} {row['per_token'] / 1024:13.1f} "
              f"{row['per_token'] / ref['per_token']:6.2f} {row['fit'] / ref['fit']:13.2f}x "
              f"{row['step_kb'] / 1024:9.1f} {row['step_kb'] / ref['step_kb']:6.2f}")


if __name__ == "__main__":
    main()
