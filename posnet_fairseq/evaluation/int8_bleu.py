"""What int8 decoding costs in BLEU: each model trained briefly on the synthetic corpus, then decoded fp32 and int8.

For every ``--archs`` preset: ``posnet-train`` for ``--updates`` updates on
the synthetic corpus (:func:`posnet_fairseq.benchmark.decode_models.synthetic_data_bin`),
then fairseq-generate (beam 4) of its test set from the trained checkpoint, from
its int8 export with every linear layer int8 and from the one that keeps the
output projection in fp32 (``posnet-quantize [--fp32-output]``,
:mod:`posnet_fairseq.models.int8`). Prints corpus BLEU (sacrebleu on the
word-level synthetic text, ``--tokenize none``) of each and the int8 - fp32
deltas. A figure for docs/benchmarks.md, not a test::

    python -m posnet_fairseq.evaluation.int8_bleu --archs transformer,aan_plus_avg,hc_gaussian,rposnet_transformer
"""
import argparse
import os
import subprocess
import sys

VARIANTS = (("fp32", None), ("int8", []), ("int8, fp32 output", ["--fp32-output"]))
# Small enough to train in minutes on one CPU core, big enough to learn the synthetic task.
DIMS = ["--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
        "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128", "--decoder-attention-heads", "4",
        "--encoder-layers", "2", "--decoder-layers", "2"]


def _tool(*argv):
    subprocess.run([sys.executable, "-W", "ignore", "-m", *argv], check=True, stdout=subprocess.DEVNULL)


def train(data_bin, arch, save_dir, updates):
    """posnet-train ``arch`` (tiny dimensions, DIMS) for ``updates`` updates; returns checkpoint_last.pt."""
    _tool("posnet_fairseq.cli.fairseq_wrappers", "train", data_bin, "--arch", arch, *DIMS,
          "--share-all-embeddings", "--optimizer", "adam", "--lr", "0.002", "--lr-scheduler", "inverse_sqrt",
          "--warmup-updates", "100", "--max-tokens", "2000", "--max-update", str(updates), "--dropout", "0.1",
          "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--seed", "1",
          "--save-dir", save_dir, "--no-epoch-checkpoints", "--disable-validation", "--no-progress-bar",
          "--num-workers", "0", "--cpu")
    return os.path.join(save_dir, "checkpoint_last.pt")


def bleu(data_bin, checkpoint, results_dir):
    """Corpus BLEU of fairseq-generate (beam 4) on the test split."""
    import sacrebleu

    from . import generate_output

    _tool("posnet_fairseq.cli.fairseq_wrappers", "generate", data_bin, "--path", checkpoint, "--beam", "4",
          "--batch-size", "64", "--gen-subset", "test", "--cpu", "--num-workers", "0", "--results-path", results_dir)
    out = generate_output.read(os.path.join(results_dir, "generate-test.txt"))
    ids = sorted(out.references)
    return sacrebleu.corpus_bleu([out.hypotheses.get(i, "") for i in ids], [[out.references[i] for i in ids]],
                                 tokenize="none").score


def main(argv=None):
    from ..benchmark import decode_models, decode_speed, resolve

    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.evaluation.int8_bleu",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default="transformer,aan_plus_avg,hc_gaussian,rposnet_transformer",
                   help="comma-separated presets (the tiny size; DIMS set the dimensions)")
    p.add_argument("--updates", type=int, default=400, help="training updates per model (default: 400)")
    p.add_argument("--sentences", type=int, default=200, help="test sentences (default: 200)")
    p.add_argument("--workdir", default="/tmp/int8_bleu")
    args = p.parse_args(argv)
    decode_speed.quiet()
    data_bin = decode_models.synthetic_data_bin(args.workdir, args.sentences)
    print(f"# BLEU on {args.sentences} synthetic test sentences, beam 4; {args.updates} updates per model, "
          f"dimensions {' '.join(DIMS)}")
    print("| arch | " + " | ".join(name for name, _ in VARIANTS) + " | int8 - fp32 | int8 (fp32 output) - fp32 |")
    print("|---|" + "---|" * (len(VARIANTS) + 2))
    for name in [a.strip() for a in args.archs.split(",") if a.strip()]:
        arch = resolve(name, "tiny")
        work = os.path.join(args.workdir, arch)
        checkpoint = train(data_bin, arch, work, args.updates)
        scores = []
        for label, flags in VARIANTS:
            path = checkpoint
            if flags is not None:
                path = os.path.join(work, f"int8{''.join(flags)}.pt")
                _tool("posnet_fairseq.cli.quantize", checkpoint, path, *flags)
            scores.append(bleu(data_bin, path, os.path.join(work, label.replace(", ", "-").replace(" ", "-"))))
        print(f"| {arch} | " + " | ".join(f"{s:.2f}" for s in scores)
              + f" | {scores[1] - scores[0]:+.2f} | {scores[2] - scores[0]:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
