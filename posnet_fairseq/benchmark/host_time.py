"""Host time per step on the CPU: the proxy of a launch-bound GPU step's CPU issue time.

A base model's GPU step at the batches of issue 48 is bound by the time the CPU needs to issue its kernels
(Python, autograd, the dispatcher), not by their count alone: on the H200 rPosNet launched 1.02x the
Transformer's kernels per training step and trained at 0.85x its speed (docs/benchmarks.md, "Host time"). At
toy shapes the CPU's arithmetic is negligible, and a step's CPU time is that issue time. For each arch this
times, on one thread in fp32, the training step and the incremental decoding step that :mod:`.op_counts`
counts, at the arch's depth and heads but ``HEAD_WIDTH`` columns per head (at the presets' own widths the
CPU's arithmetic, Adam's above all, is most of a step), ``BATCH`` sentences of ``LENGTH`` tokens, a
vocabulary of ``VOCAB``: the median over ``repeats`` warm repetitions, in each of ``rounds`` rounds that
alternate the archs, then the median over the rounds. A step is timed by the CPU time of its thread, not by
the wall clock: on a shared machine the wall clock adds the waits for a core, which swung one arch's median
2x between runs at a load of 4-5 on 2 cores. Adam runs its multi-tensor implementation, as torch runs it on
CUDA parameters.
"""
import os
import statistics
import time

import torch

from .decoding_step import DecodingStep
from .measurements import ratio
from .training_step import TrainingStep, parse_train_args

BATCH, LENGTH, VOCAB = 2, 8, 64
HEAD_WIDTH = 8  # columns per head: every operator of the arch's depth and heads, next to no arithmetic
WARMUP = 2  # untimed steps first (the first builds Adam's state)


def narrow_flags(arch, model_flags=()):
    """``model_flags`` and the widths of ``arch`` at ``HEAD_WIDTH`` columns per head (feed-forward 4 times the
    model's width), its depth and heads unchanged."""
    args = parse_train_args(["--arch", arch, *model_flags])
    flags = list(model_flags)
    for side in ("encoder", "decoder"):
        width = HEAD_WIDTH * getattr(args, f"{side}_attention_heads")
        flags += [f"--{side}-embed-dim", str(width), f"--{side}-ffn-embed-dim", str(4 * width)]
    return flags


def training_step(arch, model_flags=()):
    """The toy training step of ``arch`` (a :class:`.training_step.TrainingStep`, Adam multi-tensor), warm."""
    step = TrainingStep(arch, BATCH, LENGTH, VOCAB, narrow_flags(arch, model_flags))
    for group in step.optimizer.param_groups:
        group["foreach"] = True
    for _ in range(WARMUP):
        step()
    return step


def decoding_step(arch, beam, model_flags=()):
    """The toy incremental decoding step of ``arch`` at position ``LENGTH`` - 1 (a
    :class:`.decoding_step.DecodingStep`), warm."""
    step = DecodingStep(arch, BATCH, beam, LENGTH, LENGTH - 1, VOCAB, narrow_flags(arch, model_flags), "cpu")
    for _ in range(WARMUP):
        step.prepare()
        step()
    return step


def timed(step, prepare=None):
    """CPU seconds of this thread in one ``step()`` (after ``prepare()``, untimed)."""
    if prepare is not None:
        prepare()
    start = time.thread_time()
    step()
    return time.thread_time() - start


def measure(archs, beam, model_flags=(), rounds=3, repeats=10):
    """{arch: {"train ms": median ms, "decode ms": median ms}}, the archs alternating within each round."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        steps = {arch: (training_step(arch, model_flags), decoding_step(arch, beam, model_flags)) for arch in archs}
        runs = {arch: {"train ms": [], "decode ms": []} for arch in archs}
        for _ in range(rounds):
            for arch in archs:
                train, decode = steps[arch]
                runs[arch]["train ms"].append(statistics.median(timed(train) for _ in range(repeats)))
                runs[arch]["decode ms"].append(statistics.median(timed(decode, decode.prepare)
                                                                 for _ in range(repeats)))
    finally:
        torch.set_num_threads(threads)
    return {arch: {key: 1e3 * statistics.median(values) for key, values in run.items()} for arch, run in runs.items()}


def speed_ratio(ms, base_ms):
    """The speed of a step taking ``ms`` against the baseline's taking ``base_ms`` (above 1 = faster), as the
    GPU's tokens/s ratios are given."""
    return ratio(base_ms, ms)


def header(rounds, repeats, beam):
    """The one line that says what the host-time columns proxy, how they were measured and under what load."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (f"# host time per step, the proxy of a launch-bound GPU step's CPU issue time (benchmark/host_time.py): "
            f"median CPU ms of the one thread (thread time), fp32, at each arch's depth and heads, {HEAD_WIDTH} columns per head, "
            f"training {BATCH} x {LENGTH} tokens, decoding step at position {LENGTH - 1} of {BATCH} x beam {beam} "
            f"({LENGTH} source tokens), vocab {VOCAB}; {rounds} rounds of {repeats} repetitions, the archs "
            f"alternating; speed / Transformer = the Transformer's ms over the arch's; load average {load} "
            f"(1, 5, 15 min)")
