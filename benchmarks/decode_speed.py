"""Decoding speed of fairseq-generate, Transformer vs position-based decoders, on CPU.

Builds a random-weight checkpoint per architecture (a freshly initialised
model saved in fairseq's checkpoint format: speed does not depend on the
weights), then decodes the same source sentences with fairseq-generate
(in-process, ``fairseq_cli.generate.main``) with beam 4 and batch 32, forcing
every hypothesis to the same output length (``--min-len L --max-len-a 0
--max-len-b L``) so every model runs the same number of decoder steps. The
models alternate within each round; the table gives the median over rounds of
fairseq's own sentences/s (generation time only, loading excluded) and the
ratio to the baseline measured in the same run. A second pair of columns gives
the process CPU time spent generating (median) and its ratio: on a machine
shared with other jobs it is the steadier figure. The last column, CPU time /
(sentences x output tokens), is the per-token decoding cost; with several
``--lengths`` a second table gives it per length and its growth from the first
length to the last (1.0: every decoding step costs the same, as in a decoder
with a constant-size state).

    python benchmarks/decode_speed.py                       # transformer vs aan_plus_*, base dims
    python benchmarks/decode_speed.py --archs posnet_transformer_base,hc_gaussian --lengths 30,80
    python benchmarks/decode_speed.py --quick               # smoke test
    python benchmarks/decode_speed.py --threads 1 --lengths 30,80,200 \
        --archs transformer,rposnet_transformer_base,hc_gaussian,transformer_nosa   # per-token cost growth

``transformer`` in ``--archs`` stands for ``posnet_transformer_base``. Extra
fairseq model flags for every arch go after ``--``.
"""
import argparse
import os
import statistics
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ARCHS = "transformer,aan_plus_avg,aan_plus_ner,aan_plus_far,aan_plus_wet"
ALIASES = {"transformer": "posnet_transformer_base"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archs", default=DEFAULT_ARCHS,
                   help=f"comma-separated architectures; the first is the baseline (default: {DEFAULT_ARCHS})")
    p.add_argument("--lengths", default="30", help="forced output lengths in tokens, comma-separated (default: 30)")
    p.add_argument("--sentences", type=int, default=128, help="source sentences decoded per run (default: 128)")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the models alternate in each (default: 5)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--workdir", default="/tmp/decode_speed", help="corpus, checkpoints and outputs")
    p.add_argument("--profile", metavar="ARCH", help="after the timing rounds, cProfile one run of ARCH")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 32 sentences, length 8, one round")
    args, model_flags = p.parse_known_args(argv)
    if model_flags and model_flags[0] == "--":
        model_flags = model_flags[1:]
    args.model_flags = model_flags
    if args.quick:
        args.sentences, args.lengths, args.rounds = 32, "8", 1
    args.archs = [ALIASES.get(a.strip(), a.strip()) for a in args.archs.split(",") if a.strip()]
    args.lengths = [int(n) for n in args.lengths.split(",")]
    return args


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    sys.path.insert(0, REPO)
    # The measuring code is the package's, shared with posnet-compare.
    from posnet_fairseq.benchmark.decode_speed import generate_timed, quiet, random_checkpoint, synthetic_data_bin

    quiet()
    data_bin = synthetic_data_bin(args.workdir, args.sentences)
    checkpoints, params = {}, {}
    for arch in args.archs:
        checkpoints[arch] = os.path.join(args.workdir, f"{arch}.pt")
        params[arch] = random_checkpoint(data_bin, arch, args.model_flags, checkpoints[arch])

    print(f"# decode speed: {args.sentences} sentences, beam {args.beam}, batch {args.batch_size}, CPU, "
          f"torch threads {torch.get_num_threads()}, {os.cpu_count()} cores, {args.rounds} rounds")
    print(f"# load average at start: {load_average()}")
    rates = {(arch, n): [] for arch in args.archs for n in args.lengths}
    cpu = {(arch, n): [] for arch in args.archs for n in args.lengths}
    out_len = {}
    start = time.time()
    results_dir = os.path.join(args.workdir, "out")
    for r in range(args.rounds):
        for length in args.lengths:
            for arch in args.archs:
                run = generate_timed(data_bin, checkpoints[arch], length, results_dir, beam=args.beam,
                                     batch_size=args.batch_size)
                rates[arch, length].append(run["rate"])
                cpu[arch, length].append(run["cpu_s"])
                out_len[arch, length] = run["tokens_per_hyp"]
        print(f"# round {r + 1}/{args.rounds} done after {time.time() - start:.0f}s, load {load_average()}",
              flush=True)

    base = args.archs[0]
    # Per-token cost: CPU seconds spent generating / (sentences x output tokens per hypothesis).
    per_token = {key: statistics.median(cpu[key]) / (args.sentences * out_len[key]) for key in cpu}
    print(f"\n| arch | params | output tokens (incl. EOS) | sentences/s (median) | all rounds | ratio vs {base} "
          f"| CPU s (median) | CPU-time ratio | CPU ms per token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for length in args.lengths:
        base_rate = statistics.median(rates[base, length])
        base_cpu = statistics.median(cpu[base, length])
        for arch in args.archs:
            med = statistics.median(rates[arch, length])
            med_cpu = statistics.median(cpu[arch, length])
            rounds = " ".join(f"{x:.2f}" for x in rates[arch, length])
            print(f"| {arch} | {params[arch] / 1e6:.1f}M | {out_len[arch, length]:.0f} | {med:.2f} | {rounds} "
                  f"| {med / base_rate:.2f}x | {med_cpu:.2f} | {base_cpu / med_cpu:.2f}x "
                  f"| {1000 * per_token[arch, length]:.3f} |")
    if len(args.lengths) > 1:
        first, last = args.lengths[0], args.lengths[-1]
        print(f"\nPer-token decoding cost (CPU ms per output token, median) and its growth: cost at {last} tokens "
              f"/ cost at {first} (1.00 = constant cost per step). Speed ratio = {base}'s CPU time / the arch's.")
        print("| arch | " + " | ".join(f"ms/token at {n}" for n in args.lengths) + f" | {last} / {first} | "
              + " | ".join(f"speed ratio at {n}" for n in args.lengths) + " |")
        print("|---|" + "---|" * (2 * len(args.lengths) + 1))
        for arch in args.archs:
            costs = " | ".join(f"{1000 * per_token[arch, n]:.3f}" for n in args.lengths)
            speed = " | ".join(f"{per_token[base, n] / per_token[arch, n]:.2f}x" for n in args.lengths)
            print(f"| {arch} | {costs} | {per_token[arch, last] / per_token[arch, first]:.2f} | {speed} |")
    print(f"\n# load average at end: {load_average()}; wall {time.time() - start:.0f}s")

    if args.profile:
        import cProfile
        import pstats

        arch = ALIASES.get(args.profile, args.profile)
        profiler = cProfile.Profile()
        profiler.enable()
        generate_timed(data_bin, checkpoints[arch], args.lengths[-1], results_dir, beam=args.beam,
                       batch_size=args.batch_size)
        profiler.disable()
        print(f"\n# cProfile of one run of {arch} (length {args.lengths[-1]}), top 25 by total time")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
