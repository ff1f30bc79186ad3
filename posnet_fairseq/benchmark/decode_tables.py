"""The decoding benchmark's tables (:mod:`.decode_speed`): per length, and the per-token cost across lengths.

Every ratio divides by the row ``base`` measured in the same run: its CPU
time (on a GPU: its GPU time) over the row's (the speed ratio), its FLOPs
per generated token over the row's (the ceiling, :mod:`.flops`) and the
share of the ceiling reached (:func:`~.measurements.against`).
"""
from .measurements import against


def print_tables(runs, names, base, lengths, sentences, params, limit, arithmetic, unmeasured=(), clock="CPU"):
    """Prints the tables for ``runs`` ({(row, length): DecodeTiming}) in the order of ``names``; ``params``,
    ``limit`` (target positions) per row, ``arithmetic`` per (row, length); ``unmeasured``: (row, why) pairs
    printed as rows that say why they have no figures; ``clock``: "CPU" (the rounds' ``cpu_s``) or "GPU" (their
    ``gpu_s``), the time the ratios divide."""
    seconds = {key: run.median(f"{clock.lower()}_s") for key, run in runs.items()}
    # Per-token cost: seconds spent generating / (sentences x output tokens per hypothesis).
    per_token = {key: seconds[key] / (sentences * run.tokens_per_hyp) for key, run in runs.items()}
    print(f"\nSpeed ratio: {base}'s {clock} time / the row's. GFLOP/s: the arithmetic done per {clock} second. "
          f"Ceiling: {base}'s FLOPs per generated token / the row's (what the arithmetic allows). Share: speed ratio / "
          f"ceiling, i.e. the row's GFLOP/s over {base}'s.")
    print(f"| arch | params | output tokens (incl. EOS) | sentences/s (median) | all rounds | ratio vs {base} "
          f"| {clock} s (median) | {clock}-time ratio | {clock} ms per token | MFLOP per token | GFLOP/s | ceiling "
          "| share of ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for length in lengths:
        for row, why in unmeasured:
            print(f"| {row} | {why} |" + " |" * 11)
        for arch in names:
            key = arch, length
            if key not in runs:
                print(f"| {arch} | {params[arch] / 1e6:.1f}M | beyond its {limit[arch]} target positions |"
                      + " |" * 10)
                continue
            run, base_run = runs[key], runs[base, length]
            cmp = against(seconds[base, length] / seconds[key], arithmetic[key], arithmetic[base, length])
            rounds = " ".join(f"{r['rate']:.2f}" for r in run.rounds)
            print(f"| {arch} | {params[arch] / 1e6:.1f}M | {run.tokens_per_hyp:.0f} | {run.rate:.2f} | {rounds} "
                  f"| {run.rate / base_run.rate:.2f}x | {seconds[key]:.2f} | {cmp.speed_ratio:.2f}x "
                  f"| {1000 * per_token[key]:.3f} | {arithmetic[key] / 1e6:.1f} "
                  f"| {arithmetic[key] / per_token[key] / 1e9:.2f} | {cmp.ceiling:.2f}x "
                  f"| {100 * cmp.share:.0f}% |")
    if len(lengths) > 1:
        first, last = lengths[0], lengths[-1]
        print(f"\nPer-token decoding cost ({clock} ms per output token, median) and its growth: cost at {last} "
              f"tokens / cost at {first} (1.00 = constant cost per step). Speed ratio = {base}'s {clock} time / the "
              "row's; ceiling and share as above.")
        print("| arch | " + " | ".join(f"ms/token at {n}" for n in lengths) + f" | {last} / {first} | "
              + " | ".join(f"speed ratio (ceiling, share) at {n}" for n in lengths) + " |")
        print("|---|" + "---|" * (2 * len(lengths) + 1))
        for arch in names:
            costs = " | ".join(f"{1000 * per_token[arch, n]:.3f}" if (arch, n) in runs else "n/a" for n in lengths)
            cells = []
            for n in lengths:
                if (arch, n) not in runs:
                    cells.append(f"beyond {limit[arch]} positions")
                    continue
                cmp = against(per_token[base, n] / per_token[arch, n], arithmetic[arch, n], arithmetic[base, n])
                cells.append(f"{cmp.speed_ratio:.2f}x ({cmp.ceiling:.2f}x, {100 * cmp.share:.0f}%)")
            growth = f"{per_token[arch, last] / per_token[arch, first]:.2f}" \
                if (arch, last) in runs and (arch, first) in runs else "n/a"
            print(f"| {arch} | {costs} | {growth} | {' | '.join(cells)} |")
