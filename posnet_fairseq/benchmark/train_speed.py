"""Training speed and memory, every mechanism family against the Transformer, the -SA ceiling and its own
arithmetic.

For each architecture (a fresh model at a time, random weights, dropout as the
preset sets it) the script runs :class:`.training_step.TrainingStep` (fairseq's
model forward, a label-smoothed cross entropy, backward and an Adam step) on a
batch of ``--batch`` random sentences of ``--length`` tokens on each side, and
reports:

* ``MFLOP/token``: forward and backward FLOPs of the step per target token
  (:mod:`.flops`), and the ``ceiling``: the Transformer's FLOPs over the
  arch's, the speed ratio its arithmetic allows;
* ``tgt tok/s``: target tokens per second, the median step time over
  ``--steps`` timed steps after ``--warmup`` steps and the first (measured,
  never timed) step, the median over ``--rounds`` rounds (the models alternate
  within a round); ``speed/Transformer``: its ratio; on CPU the ratio of the
  process CPU time per step, the steadier figure on a shared machine; ``share``:
  speed/Transformer over the ceiling; ``speed/-SA``: against the -SA ceiling;
* ``peak MiB`` (CUDA only): ``torch.cuda.max_memory_allocated`` over those
  steps (weights, gradients, Adam's moments and activations), and its ratio;
* ``max tokens`` (CUDA only): the largest batch, in target tokens (whole
  sentences of ``--length``), whose training step fits in ``--memory-cap-gib``
  (``torch.cuda.set_per_process_memory_fraction``; found by doubling, then
  bisection on out-of-memory errors), and its ratios. This is the number You et
  al. (2020) report as tokens per batch (HC-SA +17%, SH-X +26%).

    python -m posnet_fairseq.benchmark.train_speed                 # CUDA: base size, amp, all families
    python -m posnet_fairseq.benchmark.train_speed --archs transformer,transformer_nosa,hc_gaussian,hc_gaussian_shx
    python -m posnet_fairseq.benchmark.train_speed --quick         # CPU smoke test: tiny models, seconds

``--archs`` take preset names without the size (``--size`` adds it:
``rposnet_transformer`` -> ``rposnet_transformer_base``; presets whose base size
has no suffix, such as ``hc_gaussian``, are found too); ``transformer`` stands for
``posnet_transformer`` and ``transformer_nosa`` is the -SA ceiling. The first
arch is the baseline. On CPU the memory columns read n/a (torch counts
allocations on CUDA only) and the timings of a shared machine are noisy.
"""
import argparse
import statistics
import sys

import torch

from . import FAMILIES, resolve
from .measurements import against, ratio
from .training_step import TrainingStep


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.benchmark.train_speed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default=",".join(FAMILIES), help="comma-separated presets without size; the first "
                   "is the baseline (default: the Transformer, the -SA ceiling and every family)")
    p.add_argument("--ceiling", default="transformer_nosa", help="the -SA ceiling among --archs")
    p.add_argument("--size", default="base", choices=["tiny", "small", "base", "big"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    p.add_argument("--precision", choices=["fp32", "amp", "bf16"],
                   help="amp: autocast to fp16 with a gradient scaler (fairseq --amp); bf16: autocast to bf16 "
                   "(default: amp on CUDA, fp32 on CPU)")
    p.add_argument("--batch", type=int, default=128, help="sentences per timed batch (default: 128)")
    p.add_argument("--length", type=int, default=30, help="tokens per sentence, each side (default: 30)")
    p.add_argument("--vocab", type=int, default=32000, help="joined vocabulary (default: 32000, a WMT BPE)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per round (default: 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before them, after the first (default: 5)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the models alternate in each (default: 3)")
    p.add_argument("--memory-cap-gib", type=float, default=16.0,
                   help="memory cap for the max-tokens search, CUDA only; 0 skips it (default: 16)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quick", action="store_true", help="CPU smoke test: tiny models, 2 steps, one round")
    args, model_flags = p.parse_known_args(argv)
    if model_flags and model_flags[0] == "--":
        model_flags = model_flags[1:]
    args.model_flags = ["--length-ratio", "1.0", *model_flags]
    if args.quick:
        args.size, args.batch, args.length, args.vocab = "tiny", 4, 8, 64
        args.steps, args.warmup, args.rounds, args.memory_cap_gib = 2, 1, 1, 0.0
    if args.precision is None:
        args.precision = "amp" if args.device == "cuda" else "fp32"
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device (torch.cuda.is_available() is False)")
    if args.precision == "amp" and args.device == "cpu":
        p.error("--precision amp needs --device cuda (fp16 autocast with a gradient scaler); use fp32 or bf16")
    names = [a.strip() for a in args.archs.split(",") if a.strip()]
    if args.ceiling not in names:
        p.error(f"--ceiling {args.ceiling} is not among --archs")
    args.names = names
    return args


def fits(step, sentences):
    """Whether a step on ``sentences`` sentences fits in the CUDA memory allowed."""
    try:
        step(step.random_batch(sentences))
        step.sync()
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        step.optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()


def max_sentences(step, cap_bytes):
    """Largest batch (sentences) whose step fits under ``cap_bytes``; 0 if none does."""
    # The memory fraction is set per device index: torch refuses a bare "cuda" (the current device).
    index = step.device.index if step.device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), index)
    try:
        low, high = 0, 16
        while fits(step, high):  # doubling: low fits, high does not
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(step, middle) else (low, middle)
        return low
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)


def device_name(args):
    if args.device == "cuda":
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"CPU, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def measure(args):
    """{arch: {"tok_s": [per round], "cpu_s": [per round], "flops": per token, "peak": bytes or None,
    "max_tokens": int or None, "params": n}}."""
    archs = [resolve(n, args.size) for n in args.names]
    results = {arch: {"tok_s": [], "cpu_s": [], "peak": None, "max_tokens": None} for arch in archs}
    cuda = args.device == "cuda"
    for round_idx in range(args.rounds):
        for arch in archs:
            step = TrainingStep(arch, args.batch, args.length, args.vocab, args.model_flags, args.device,
                                args.precision)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            results[arch]["flops"] = step.first_step()["flops_per_token"]
            wall, cpu = step.time(args.steps, args.warmup)
            results[arch]["tok_s"].append(step.tokens / wall)
            results[arch]["cpu_s"].append(cpu)
            results[arch]["params"] = step.params
            if round_idx == 0 and cuda:
                results[arch]["peak"] = torch.cuda.max_memory_allocated()
                if args.memory_cap_gib > 0:
                    results[arch]["max_tokens"] = max_sentences(step, args.memory_cap_gib * 2 ** 30) * args.length
            del step
            if cuda:
                torch.cuda.empty_cache()
            print(f"# round {round_idx + 1}/{args.rounds} {arch}: {results[arch]['tok_s'][-1]:.0f} tgt tok/s",
                  file=sys.stderr, flush=True)
    return archs, results


def _ratio(value, reference):
    found = ratio(value, reference)
    return "n/a" if found is None else f"{found:.2f}x"


def speed_ratios(archs, results, device):
    """{arch: speed / the first arch's}: on CPU from the median process-CPU seconds per step, on CUDA from
    tokens per second."""
    if device == "cpu":
        cpu = {arch: statistics.median(results[arch]["cpu_s"]) for arch in archs}
        return {arch: cpu[archs[0]] / cpu[arch] for arch in archs}
    speed = {arch: statistics.median(results[arch]["tok_s"]) for arch in archs}
    return {arch: speed[arch] / speed[archs[0]] for arch in archs}


def table(archs, results, args):
    base, ceiling = archs[0], archs[args.names.index(args.ceiling)]
    speed = {arch: statistics.median(r["tok_s"]) for arch, r in results.items()}
    ratio_ = speed_ratios(archs, results, args.device)
    cap = f"{args.memory_cap_gib:g} GiB" if args.memory_cap_gib > 0 and args.device == "cuda" else "n/a"
    measure_of = "process CPU seconds per step" if args.device == "cpu" else "tokens per second"
    lines = [
        f"device: {device_name(args)}",
        f"training step (forward, backward, Adam), precision {args.precision}, {args.batch} x {args.length} "
        f"tokens per side, vocab {args.vocab}, size {args.size}, median of {args.rounds} round(s) of "
        f"{args.steps} steps; max tokens under a {cap} cap; ratios against {base} (Transformer) "
        f"and {ceiling} (-SA ceiling) measured in this run; speed ratios from the {measure_of}; "
        "ceiling: the Transformer's FLOPs per token over the arch's; share: speed/Transformer over the ceiling",
        "",
        "| arch | params | MFLOP/token | tgt tok/s | all rounds | speed/Transformer | ceiling | share | speed/-SA "
        "| peak MiB | peak/Transformer | max tokens | max tokens/Transformer | max tokens/-SA |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arch in archs:
        r = results[arch]
        peak = "n/a" if r["peak"] is None else f"{r['peak'] / 2 ** 20:.0f}"
        max_tokens = "n/a" if r["max_tokens"] is None else str(r["max_tokens"])
        cmp = against(ratio_[arch], r["flops"], results[base]["flops"])
        rounds = " ".join(f"{x:.0f}" for x in r["tok_s"])
        lines.append(
            f"| {arch} | {r['params']:,} | {r['flops'] / 1e6:.1f} | {speed[arch]:.0f} | {rounds} "
            f"| {cmp.speed_ratio:.2f}x | {cmp.ceiling:.2f}x | {100 * cmp.share:.0f}% "
            f"| {ratio_[arch] / ratio_[ceiling]:.2f}x "
            f"| {peak} | {_ratio(r['peak'], results[base]['peak'])} "
            f"| {max_tokens} | {_ratio(r['max_tokens'], results[base]['max_tokens'])} "
            f"| {_ratio(r['max_tokens'], results[ceiling]['max_tokens'])} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    archs, results = measure(args)
    print(table(archs, results, args))


if __name__ == "__main__":
    main()
