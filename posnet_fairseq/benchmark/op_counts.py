"""Operators per step, every mechanism against the Transformer: the per-step work a machine without a GPU can count.

On a GPU a base model's decoding step is bound by per-step overhead, kernel
launches above all (docs/install.md, "GPU runs"), so the number of operators a
step runs predicts its speed where FLOPs (:mod:`.flops`) do not. For each
architecture this counts, with ``torch.profiler``:

* ``decoding step``: one incremental step of beam search as fairseq's
  ``SequenceGenerator`` runs it on the model (``EnsembleModel``): reorder the
  encoder output and the incremental state, then the decoder on the last
  token and the log-softmax; at position ``--step``, on ``--batch-size`` x
  ``--beam`` hypotheses of ``--source-length`` source tokens (the encoder's
  output for ``--batch-size`` sentences expanded to the hypotheses), the model
  prepared as fairseq-generate prepares it (``make_generation_fast_``);
* ``training step``: one :class:`.training_step.TrainingStep` (forward, loss,
  backward, Adam) after an unprofiled one (the first builds Adam's state);

(:class:`.decoding_step.DecodingStep`, :class:`.training_step.TrainingStep`) each as a ratio to the first
arch's (the Transformer). What is counted:

* on CUDA, the GPU kernels (the profiler's CUDA events, copies and fills
  included, as each is a launch);
* on the CPU, the leaf ``aten::`` operators (those that call no other
  ``aten::`` operator: each runs a kernel or a view); an operator that
  composes others counts as the ones it calls;
* on the CPU also the operators that would launch a kernel on a GPU
  (:func:`.launches.launching`: no views, allocations or host reads,
  dropout and the optimizer as CUDA runs them), the proxy of the GPU's
  kernel count (docs/benchmarks.md calibrates it against an H100's): the
  training step is profiled a second time for it, with Adam's multi-tensor
  (foreach) implementation, which torch picks for CUDA parameters and not for
  the CPU's.

On the CPU the table also gives each arch's host time per training and decoding step at toy shapes
(:mod:`.host_time`, ``--host-rounds``): the proxy of a launch-bound GPU step's CPU issue time, which the
kernel counts do not predict (docs/benchmarks.md).

The counts do not depend on the weights, and hardly on the batch (CPU
defaults are small so that counting takes seconds)::

    python -m posnet_fairseq.benchmark.op_counts --archs transformer,aan_plus_avg,rposnet_transformer
    python -m posnet_fairseq.benchmark.op_counts --device cuda --batch-size 128 --train-batch 128
"""
import argparse

import torch

from . import host_time, resolve
from .decoding_step import DecodingStep
from .launches import launching
from .measurements import ratio
from .training_step import TrainingStep


def counted(profiler, device):
    """The operators ``profiler`` saw: CUDA kernels (copies and fills included) on ``cuda``, leaf ``aten::``
    operators on ``cpu``."""
    events = profiler.events()
    if device == "cuda":
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        if not kernels:
            raise RuntimeError("torch.profiler saw no CUDA kernel: is CUPTI available to the profiler?")
        return len(kernels)
    return sum(1 for e in events if e.name.startswith("aten::")
               and not any(child.name.startswith("aten::") for child in e.cpu_children))


def counted_and_launched(profiler, device):
    """(:func:`counted`, the operators that would launch a kernel on a GPU: :func:`.launches.launching`)."""
    return counted(profiler, device), len(launching(profiler.events()))


def profiled(function, device, count=None):
    """``count(profiler, device)`` (default :func:`counted`) of one call of ``function``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        function()
        if device == "cuda":
            torch.cuda.synchronize()
    return (count or counted)(profiler, device)


def decoding_step_ops(arch, args, count=None):
    """``count`` (:func:`profiled`) of one incremental decoding step of ``arch`` at position ``args.step`` (see
    the module doc)."""
    step = DecodingStep(arch, args.batch_size, args.beam, args.source_length, args.step, args.vocab,
                        args.model_flags, args.device)
    step.prepare()
    return profiled(step, args.device, count)


def training_step_ops(arch, args, count=None, foreach=False):
    """``count`` (:func:`profiled`) of one training step of ``arch``, after an unprofiled one; with ``foreach``,
    Adam's multi-tensor implementation, as torch runs it on CUDA parameters."""
    step = TrainingStep(arch, args.train_batch, args.train_length, args.vocab, args.model_flags, args.device,
                        args.precision)
    step()
    step.sync()
    if foreach:
        for group in step.optimizer.param_groups:
            group["foreach"] = True
    return profiled(step, args.device, count)


def count(archs, args):
    """{arch: {"decode": operators, "train": operators}}, on the CPU with "decode launches" and "train launches"
    (the operators that would launch a kernel on a GPU) and, with ``args.host_rounds``, the host times
    (:func:`.host_time.measure`: "train ms", "decode ms")."""
    counts = {}
    for arch in archs:
        if args.device == "cuda":
            counts[arch] = {"decode": decoding_step_ops(arch, args), "train": training_step_ops(arch, args)}
            continue
        decode, decode_launches = decoding_step_ops(arch, args, counted_and_launched)
        train_launches = len(launching(training_step_ops(arch, args, lambda p, _: p.events(), foreach=True)))
        counts[arch] = {"decode": decode, "train": training_step_ops(arch, args),
                        "decode launches": decode_launches, "train launches": train_launches}
    if args.device == "cpu" and args.host_rounds:
        times = host_time.measure(archs, args.beam, args.model_flags, args.host_rounds, args.host_repeats)
        for arch in archs:
            counts[arch].update(times[arch])
    return counts


def columns(args):
    """(key, column, ratio column, the ratio of a value to the baseline's) of the table, in order: the counts
    (ratio: the count over the Transformer's), then the host times (ratio: the speed, the Transformer's ms over
    the arch's)."""
    cols = [("decode", "decoding step", "decoding / Transformer", ratio),
            ("train", "training step", "training / Transformer", ratio)]
    if args.device == "cpu":
        cols[1:1] = [("decode launches", "decoding launches", "decoding launches / Transformer", ratio)]
        cols.append(("train launches", "training launches", "training launches / Transformer", ratio))
        if args.host_rounds:
            cols += [("train ms", "training host ms", "training speed / Transformer", host_time.speed_ratio),
                     ("decode ms", "decoding host ms", "decoding speed / Transformer", host_time.speed_ratio)]
    return cols


def cell(key, value):
    """A count as it is; a host time in ms to two decimals."""
    return f"{value:.2f}" if key.endswith(" ms") else str(value)


def table(archs, counts, args):
    base = archs[0]
    unit = "CUDA kernels" if args.device == "cuda" else "leaf aten operators"
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    cols = columns(args)
    lines = [
        f"# operators per step ({unit}, torch.profiler), {device}, torch {torch.__version__}, size {args.size}; "
        f"decoding step at position {args.step}, batch {args.batch_size} x beam {args.beam}, "
        f"{args.source_length} source tokens; training step {args.train_batch} x {args.train_length} tokens, "
        f"precision {args.precision}, vocab {args.vocab}; ratios against {base}"
        + ("; launches: the operators that would launch a kernel on a GPU (benchmark/launches.py)"
           if args.device == "cpu" else ""),
    ]
    if args.device == "cpu" and args.host_rounds:
        lines.append(host_time.header(args.host_rounds, args.host_repeats, args.beam))
    lines += [
        "",
        "| arch | " + " | ".join(f"{name} | {against}" for _, name, against, _ in cols) + " |",
        "|---|" + "---:|---:|" * len(cols),
    ]
    for arch in archs:
        c = counts[arch]
        lines.append(f"| {arch} | " + " | ".join(f"{cell(key, c[key])} | {of(c[key], counts[base][key]):.2f}x"
                                                   for key, _, _, of in cols) + " |")
    return "\n".join(lines)


def parse_args(argv=None):
    from . import FAMILIES

    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.benchmark.op_counts",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default=",".join(FAMILIES), help="comma-separated presets without size; the first "
                   "is the baseline (default: the Transformer, the -SA ceiling and every family)")
    p.add_argument("--size", default="base", choices=["tiny", "small", "base", "big"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", choices=["fp32", "amp", "bf16"],
                   help="of the training step (default: amp on cuda, fp32 on cpu)")
    p.add_argument("--batch-size", type=int, default=4, help="sentences decoded (default: 4)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--source-length", type=int, default=30, help="source tokens, EOS included (default: 30)")
    p.add_argument("--step", type=int, default=10, help="the decoding step counted (default: 10)")
    p.add_argument("--train-batch", type=int, default=4, help="sentences per training batch (default: 4)")
    p.add_argument("--train-length", type=int, default=30, help="tokens per training sentence (default: 30)")
    p.add_argument("--vocab", type=int, default=32000, help="joined vocabulary (default: 32000)")
    p.add_argument("--host-rounds", type=int, default=3, help="CPU only: rounds of the host-time proxy "
                   "(benchmark/host_time.py), the archs alternating; 0: none (default: 3)")
    p.add_argument("--host-repeats", type=int, default=10, help="timed repetitions of each step per round "
                   "(default: 10)")
    args, model_flags = p.parse_known_args(argv)
    args.model_flags = model_flags[1:] if model_flags[:1] == ["--"] else model_flags
    if args.host_rounds < 0:
        p.error(f"--host-rounds {args.host_rounds}: give a whole number >= 0")
    for flag in ("batch_size", "beam", "source_length", "step", "train_batch", "train_length", "vocab",
                 "host_repeats"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: give a whole number >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device (torch.cuda.is_available() is False)")
    if args.precision is None:
        args.precision = "amp" if args.device == "cuda" else "fp32"
    args.names = [a.strip() for a in args.archs.split(",") if a.strip()]
    return args


def main(argv=None):
    args = parse_args(argv)
    archs = [resolve(name, args.size) for name in args.names]
    print(table(archs, count(archs, args), args))


if __name__ == "__main__":
    main()
