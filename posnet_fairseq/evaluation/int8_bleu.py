"""What int8 decoding costs in BLEU: each model trained briefly on the synthetic corpus, then decoded fp32 and int8.

For every ``--archs`` preset: ``posnet-train`` for ``--updates`` updates (seed
``--seed``) on the synthetic corpus
(:func:`posnet_fairseq.benchmark.decode_models.synthetic_data_bin`), then
fairseq-generate (beam 4) of its ``--sentences`` test sentences (drawn apart
from the training ones) from the trained checkpoint, from its int8 export with
every linear layer int8 and from the one that keeps the output projection in
fp32 (``posnet-quantize [--fp32-output]``, :mod:`posnet_fairseq.models.int8`), the first decoded in the
machine's int8 engine (``--int8-engine auto``) and again in FBGEMM's, torch's default on x86.

Each int8 export is set against its own fp32 checkpoint: corpus BLEU of both
(sacrebleu on the word-level synthetic text, ``--tokenize none``), the
difference with the 95% interval of a paired bootstrap
(:func:`posnet_fairseq.evaluation.bootstrap.difference`: both decodings of the
same resampled sentences), how many hypotheses int8 changed, and a verdict on
issue 48's "within ``--tolerance`` (0.3) BLEU of its fp32 self" that the
interval decides (:func:`verdict`). A re-run in the same ``--workdir`` decodes
the models it trained as they are (:func:`trained`). A figure for
docs/benchmarks.md, not a test::

    python -m posnet_fairseq.evaluation.int8_bleu --archs aan_plus_avg,hc_gaussian,rposnet_transformer
"""
import argparse
import os
import subprocess
import sys
import time

from ..models.int8 import engine_overrides

# (row name, posnet-quantize flags, fairseq-generate flags)
VARIANTS = (("int8", [], []), ("int8, fp32 output", ["--fp32-output"], []),
            ("int8, FBGEMM", [], engine_overrides("fbgemm")))
# Small enough to train in minutes on one CPU core, big enough to learn the synthetic task.
DIMS = ["--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
        "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128", "--decoder-attention-heads", "4",
        "--encoder-layers", "2", "--decoder-layers", "2"]
BEAM = 4


def _tool(*argv):
    subprocess.run([sys.executable, "-W", "ignore", "-m", *argv], check=True, stdout=subprocess.DEVNULL)


def trained(checkpoint, arch, updates, seed):
    """Whether ``checkpoint`` (a path) holds ``arch`` trained ``updates`` updates with ``seed``: a re-run in the
    same ``--workdir`` (another int8 scheme on the same models) then decodes it as it is, where fairseq would
    resume it and train one update more."""
    if not os.path.exists(checkpoint):
        return False
    from fairseq import checkpoint_utils

    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    return (state["cfg"]["model"].arch, state["cfg"]["common"]["seed"],
            state["optimizer_history"][-1]["num_updates"]) == (arch, seed, updates)


def train(data_bin, arch, save_dir, updates, seed):
    """posnet-train ``arch`` (tiny dimensions, DIMS) for ``updates`` updates; returns checkpoint_last.pt (reused
    when it is already :func:`trained` so)."""
    checkpoint = os.path.join(save_dir, "checkpoint_last.pt")
    if trained(checkpoint, arch, updates, seed):
        return checkpoint
    _tool("posnet_fairseq.cli.fairseq_wrappers", "train", data_bin, "--arch", arch, *DIMS,
          "--share-all-embeddings", "--optimizer", "adam", "--lr", "0.002", "--lr-scheduler", "inverse_sqrt",
          "--warmup-updates", "100", "--max-tokens", "2000", "--max-update", str(updates), "--dropout", "0.1",
          "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--seed", str(seed),
          "--save-dir", save_dir, "--no-epoch-checkpoints", "--disable-validation", "--no-progress-bar",
          "--num-workers", "0", "--cpu")
    return checkpoint


def translate(data_bin, checkpoint, results_dir, sentences, flags=()):
    """fairseq-generate (beam BEAM, and ``flags``) of the test split: (hypotheses, references) in sentence
    order."""
    from . import generate_output

    _tool("posnet_fairseq.cli.fairseq_wrappers", "generate", data_bin, "--path", checkpoint, "--beam", str(BEAM),
          "--batch-size", "64", "--gen-subset", "test", "--cpu", "--num-workers", "0", "--results-path", results_dir,
          *flags)
    out = generate_output.read(os.path.join(results_dir, "generate-test.txt"))
    return out.ordered("hypotheses", sentences), out.ordered("references", sentences)


def verdict(low, high, tolerance):
    """Issue 48's clause read from the 95% interval [low, high] of int8 - fp32: "within" when it lies inside
    [-tolerance, +tolerance], "not within" when it lies wholly outside, else "cannot tell"."""
    if -tolerance <= low and high <= tolerance:
        return "within"
    if high < -tolerance or low > tolerance:
        return "not within"
    return "cannot tell"


def compare(fp32, int8, refs, tolerance, samples, seed):
    """int8 hypotheses against the fp32 ones of the same model: {"fp32", "int8" (corpus BLEU), "delta", "low",
    "high" (its 95% paired-bootstrap interval), "changed" (hypotheses that differ), "verdict"}."""
    from . import bootstrap

    metric = bootstrap.make_metric("bleu", tokenize="none")
    delta, low, high = bootstrap.difference(metric, int8, fp32, refs, samples, seed)
    return {"fp32": metric.corpus_score(fp32, [refs]).score, "int8": metric.corpus_score(int8, [refs]).score,
            "delta": delta, "low": low, "high": high, "changed": sum(a != b for a, b in zip(fp32, int8)),
            "verdict": verdict(low, high, tolerance)}


def row(arch, variant, r, sentences):
    """One table row of :func:`compare`'s result ``r``."""
    return (f"| {arch} | {variant} | {r['fp32']:.2f} | {r['int8']:.2f} | {r['delta']:+.2f} "
            f"({r['low']:+.2f} to {r['high']:+.2f}) | {r['changed']} of {sentences} | {r['verdict']} |")


def _positive(flag, value):
    if value < 1:
        raise SystemExit(f"{flag} {value}: expected at least 1")


def _count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def header(args, archs, train_sentences):
    """The lines that say what ran."""
    import torch

    from ..models import int8

    return [f"# int8 against fp32 BLEU: {', '.join(archs)}",
            f"# each trained once: {args.updates} updates, seed {args.seed}, on {train_sentences} synthetic "
            f"sentences; dimensions {' '.join(DIMS)}",
            f"# scored on {args.sentences} other synthetic sentences (the test split), beam {BEAM}, sacrebleu "
            f"--tokenize none; paired bootstrap: {args.samples} resamples, seed {args.bootstrap_seed}, 95% "
            f"interval; verdict: the interval against +-{args.tolerance} BLEU; torch {torch.__version__}; the "
            f"int8 engine of this machine (--int8-engine auto): {int8.engine('auto')}",
            "",
            f"| arch | export | fp32 BLEU | int8 BLEU | int8 - fp32 (95% interval) | hypotheses changed | "
            f"within {args.tolerance} BLEU |",
            "|---|---|---|---|---|---|---|"]


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.evaluation.int8_bleu",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default="transformer,aan_plus_avg,hc_gaussian,rposnet_transformer",
                   help="comma-separated presets (the tiny size; DIMS set the dimensions)")
    # 2000 updates, 5000 sentences: the shipped run's (docs/cpu/2026-11-28/int8-bleu.md); after 600 updates int8
    # changed 809 of AAN+ AVG's 5000 hypotheses, an interval 1.8 BLEU wide that decides nothing against 0.3
    p.add_argument("--updates", type=int, default=2000, help="training updates per model (default: 2000)")
    p.add_argument("--seed", type=int, default=1, help="training seed (default: 1)")
    p.add_argument("--sentences", type=int, default=5000, help="test sentences (default: 5000; HC-SA's rare long "
                   "repetitions need 20000 for a verdict: docs/cpu/2026-11-28/int8-bleu-2.md)")
    p.add_argument("--samples", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    p.add_argument("--bootstrap-seed", type=int, default=12345, help="bootstrap seed (default: 12345)")
    p.add_argument("--tolerance", type=float, default=0.3, help="BLEU the verdict allows (default: 0.3)")
    p.add_argument("--workdir", default="/tmp/int8_bleu")
    args = p.parse_args(argv)
    for flag in ("updates", "sentences", "samples"):
        _positive(f"--{flag}", getattr(args, flag))
    if not args.tolerance > 0:
        raise SystemExit(f"--tolerance {args.tolerance}: expected a positive number of BLEU points")
    return args


def main(argv=None):
    from ..benchmark import decode_models, decode_speed, resolve

    args = parse(argv)
    archs = [resolve(name.strip(), "tiny") for name in args.archs.split(",") if name.strip()]
    decode_speed.quiet()
    start = time.monotonic()
    data_bin = decode_models.synthetic_data_bin(args.workdir, args.sentences)
    train_sentences = _count_lines(os.path.join(args.workdir, f"raw-{args.sentences}", "train.src"))
    print("\n".join(header(args, archs, train_sentences)), flush=True)
    for arch in archs:
        work = os.path.join(args.workdir, arch)
        checkpoint = train(data_bin, arch, work, args.updates, args.seed)
        fp32, refs = translate(data_bin, checkpoint, os.path.join(work, "fp32"), args.sentences)
        exported = set()  # an export decoded by two variants is written once
        for variant, export_flags, generate_flags in VARIANTS:
            path = os.path.join(work, f"int8{''.join(export_flags)}.pt")
            if path not in exported:
                _tool("posnet_fairseq.cli.quantize", checkpoint, path, *export_flags)
                exported.add(path)
            int8, _ = translate(data_bin, path, os.path.join(work, variant.replace(", ", "-").replace(" ", "-")),
                                args.sentences, generate_flags)
            result = compare(fp32, int8, refs, args.tolerance, args.samples, args.bootstrap_seed)
            print(row(arch, variant, result, args.sentences), flush=True)
    print(f"\n# wall time {(time.monotonic() - start) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
