"""Training speed and memory, every mechanism family against the Transformer and the -SA ceiling.

For each architecture (a fresh model at a time, random weights, dropout as the
preset sets it) the script runs fairseq's model forward, a label-smoothed
cross entropy, backward and an Adam step on random batches of ``--batch``
sentences of ``--length`` tokens on each side, and reports:

* ``tgt tok/s``: target tokens per second over ``--steps`` timed steps after
  ``--warmup`` steps, the median over ``--rounds`` rounds (the models alternate
  within a round), and its ratio to the Transformer and to the -SA ceiling;
* ``peak MiB`` (CUDA only): ``torch.cuda.max_memory_allocated`` over those
  steps (weights, gradients, Adam's moments and activations), and its ratio;
* ``max tokens`` (CUDA only): the largest batch, in target tokens (whole
  sentences of ``--length``), whose training step fits in ``--memory-cap-gib``
  (``torch.cuda.set_per_process_memory_fraction``; found by doubling, then
  bisection on out-of-memory errors), and its ratios. This is the number You et
  al. (2020) report as tokens per batch (HC-SA +17%, SH-X +26%).

    python benchmarks/train_speed.py                    # CUDA: base size, amp, all families
    python benchmarks/train_speed.py --archs transformer,hc_gaussian,hc_gaussian_shx --memory-cap-gib 11
    python benchmarks/train_speed.py --quick            # CPU smoke test: tiny models, seconds

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
import time

import torch

DEFAULT_ARCHS = ",".join([
    "transformer", "transformer_nosa", "rposnet_transformer", "aposnet_transformer", "aan_plus_avg",
    "aan_plus_wet", "ssru", "linear_attention", "hc_gaussian", "hc_gaussian_shx", "tisa_transformer", "shaw_transformer",
    "relattn_transformer", "linearnet_transformer", "fouriernet_transformer", "lightconv_apptek_transformer",
])
ALIASES = {"transformer": "posnet_transformer"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default=DEFAULT_ARCHS, help="comma-separated presets without size; the first is "
                   "the baseline (default: the Transformer, the -SA ceiling and one or two presets per family)")
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
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before them (default: 5)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the models alternate in each (default: 3)")
    p.add_argument("--memory-cap-gib", type=float, default=16.0,
                   help="memory cap for the max-tokens search, CUDA only; 0 skips it (default: 16)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quick", action="store_true", help="CPU smoke test: tiny models, 2 steps, one round")
    args, model_flags = p.parse_known_args(argv)
    if model_flags and model_flags[0] == "--":
        model_flags = model_flags[1:]
    args.model_flags = model_flags
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


def resolve(name, size):
    """The registered preset for ``name`` at ``size``."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posnet_fairseq  # noqa: F401  (registers the presets)

    prefix = ALIASES.get(name, name)
    candidates = [f"{prefix}_{size}"] + ([prefix] if size == "base" else [])
    for arch in candidates:
        if arch in ARCH_MODEL_REGISTRY:
            return arch
    raise SystemExit(f"--archs {name}: no preset {' or '.join(candidates)} is registered")


class Bench:
    """One architecture's model, optimizer and batch maker on the device."""

    def __init__(self, arch, args):
        from fairseq import options
        from fairseq.data import Dictionary
        from fairseq.tasks.translation import TranslationTask

        import posnet_fairseq

        self.args, self.device = args, torch.device(args.device)
        plugin = posnet_fairseq.__path__[0]
        fairseq_args = options.parse_args_and_arch(options.get_training_parser(), [
            "/nonexistent", "--user-dir", plugin, "--arch", arch, "--length-ratio", "1.0", *args.model_flags])
        d = Dictionary()
        for i in range(args.vocab):
            d.add_symbol(f"w{i}")
        d.finalize(padding_factor=8)
        self.dictionary = d
        torch.manual_seed(0)
        self.model = TranslationTask(fairseq_args, d, d).build_model(fairseq_args).to(self.device).train()
        self.params = sum(p.numel() for p in self.model.parameters())
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4, betas=(0.9, 0.98))
        self.scaler = torch.amp.GradScaler("cuda") if args.precision == "amp" else None
        self.autocast = {"amp": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
        self.generator = torch.Generator().manual_seed(1)

    def batch(self, sentences):
        d, n = self.dictionary, self.args.length
        src = torch.randint(d.nspecial, len(d), (sentences, n), generator=self.generator)
        src[:, -1] = d.eos()
        tgt = torch.randint(d.nspecial, len(d), (sentences, n), generator=self.generator)
        tgt[:, -1] = d.eos()
        prev = torch.cat([torch.full((sentences, 1), d.eos()), tgt[:, :-1]], dim=1)
        lengths = torch.full((sentences,), n)
        return [t.to(self.device) for t in (src, lengths, prev, tgt)]

    def step(self, batch):
        src, lengths, prev, tgt = batch
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.autocast or torch.float32,
                            enabled=self.autocast is not None):
            logits = self.model(src, lengths, prev)[0]
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt.view(-1),
                                                     label_smoothing=0.1)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def tokens_per_second(self):
        batch = self.batch(self.args.batch)
        for _ in range(self.args.warmup):
            self.step(batch)
        self.sync()
        start = time.perf_counter()
        for _ in range(self.args.steps):
            self.step(batch)
        self.sync()
        return self.args.steps * self.args.batch * self.args.length / (time.perf_counter() - start)

    def fits(self, sentences):
        try:
            self.step(self.batch(sentences))
            self.sync()
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            self.optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    def max_sentences(self, cap_bytes):
        """Largest batch (sentences) whose step fits under ``cap_bytes``; 0 if none does."""
        total = torch.cuda.get_device_properties(self.device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), self.device)
        try:
            low, high = 0, 16
            while self.fits(high):  # doubling: low fits, high does not
                low, high = high, 2 * high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if self.fits(middle) else (low, middle)
            return low
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0, self.device)

    def close(self):
        del self.model, self.optimizer
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def device_name(args):
    if args.device == "cuda":
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"CPU, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def measure(args):
    """{arch: {"tok_s": [per round], "peak": bytes or None, "max_tokens": int or None, "params": n}}."""
    archs = [resolve(n, args.size) for n in args.names]
    results = {arch: {"tok_s": [], "peak": None, "max_tokens": None} for arch in archs}
    cuda = args.device == "cuda"
    for round_idx in range(args.rounds):
        for arch in archs:
            bench = Bench(arch, args)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            results[arch]["tok_s"].append(bench.tokens_per_second())
            results[arch]["params"] = bench.params
            if round_idx == 0 and cuda:
                results[arch]["peak"] = torch.cuda.max_memory_allocated()
                if args.memory_cap_gib > 0:
                    sentences = bench.max_sentences(args.memory_cap_gib * 2 ** 30)
                    results[arch]["max_tokens"] = sentences * args.length
            bench.close()
            print(f"# round {round_idx + 1}/{args.rounds} {arch}: {results[arch]['tok_s'][-1]:.0f} tgt tok/s",
                  file=sys.stderr, flush=True)
    return archs, results


def _ratio(value, reference):
    return "n/a" if value is None or not reference else f"{value / reference:.2f}x"


def table(archs, results, args):
    base, ceiling = archs[0], archs[args.names.index(args.ceiling)]
    speed = {arch: statistics.median(r["tok_s"]) for arch, r in results.items()}
    cap = f"{args.memory_cap_gib:g} GiB" if args.memory_cap_gib > 0 and args.device == "cuda" else "n/a"
    lines = [
        f"device: {device_name(args)}",
        f"training step (forward, backward, Adam), precision {args.precision}, {args.batch} x {args.length} "
        f"tokens per side, vocab {args.vocab}, size {args.size}, median of {args.rounds} round(s) of "
        f"{args.steps} steps; max tokens under a {cap} cap; ratios against {base} (Transformer) "
        f"and {ceiling} (-SA ceiling) measured in this run",
        "",
        "| arch | params | tgt tok/s | speed/Transformer | speed/-SA | peak MiB | peak/Transformer | max tokens "
        "| max tokens/Transformer | max tokens/-SA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arch in archs:
        r = results[arch]
        peak = "n/a" if r["peak"] is None else f"{r['peak'] / 2 ** 20:.0f}"
        max_tokens = "n/a" if r["max_tokens"] is None else str(r["max_tokens"])
        lines.append(
            f"| {arch} | {r['params']:,} | {speed[arch]:.0f} | {_ratio(speed[arch], speed[base])} "
            f"| {_ratio(speed[arch], speed[ceiling])} | {peak} | {_ratio(r['peak'], results[base]['peak'])} "
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
