"""Peak training memory of position-based models against the Transformer.

You et al. (2020, §6) report that hard-coded self-attention fits more tokens
in a training batch on a fixed GPU (HC-SA +17%, SH-X +26%). On CPU the same
quantity is the resident memory one training step (forward, backward, Adam)
adds on top of the built model. Every (architecture, batch) pair runs in a
fresh subprocess, whose peak RSS is reset after the model is built, so
imports, model construction and other architectures do not leak into the
number. Two batch sizes separate the per-token cost (activations) from the
fixed cost (gradients, Adam state); the ratio of per-token costs is how many
more tokens fit in a batch under a large memory budget::

    python benchmarks/memory.py --archs hc_gaussian,hc_gaussian_shx,transformer_nosa
    python benchmarks/memory.py --archs hc_gaussian_tiny --reference posnet_transformer_tiny

Every line is printed as a ratio against ``--reference`` measured in the
same run.
"""
import argparse
import json
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss_kb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak():
    """Resets the peak RSS (Linux >= 4.0); returns False where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def measure(arch, batch, length, vocab, flags):
    """One training step of ``arch`` on ``batch`` x ``length`` tokens; memory in KiB."""
    import torch
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.tasks.translation import TranslationTask

    torch.set_num_threads(1)  # memory does not depend on threads; the cores are shared
    plugin = os.path.join(ROOT, "posnet_fairseq")
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       ["/nonexistent", "--user-dir", plugin, "--arch", arch, *flags])
    dictionary = Dictionary()
    for i in range(vocab):
        dictionary.add_symbol(f"w{i}")
    dictionary.finalize(padding_factor=8)
    torch.manual_seed(0)
    model = TranslationTask(args, dictionary, dictionary).build_model(args).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    low = dictionary.nspecial
    src = torch.randint(low, len(dictionary), (batch, length))
    src[:, -1] = dictionary.eos()
    tgt = torch.randint(low, len(dictionary), (batch, length))
    prev = torch.cat([torch.full((batch, 1), dictionary.eos()), tgt[:, :-1]], dim=1)
    lengths = torch.full((batch,), length)
    params = sum(p.numel() for p in model.parameters())

    before = _rss_kb("VmRSS")
    exact = _reset_peak()
    logits = model(src, lengths, prev)[0]
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
    loss.backward()
    optimizer.step()
    peak = _rss_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"arch": arch, "batch": batch, "tokens": batch * length, "params": params,
            "step_kb": peak - before, "peak_kb": peak, "exact_peak": exact}


def run_child(arch, batch, opts):
    command = [sys.executable, os.path.abspath(__file__), "--child", arch, "--batch", str(batch),
               "--length", str(opts.length), "--vocab", str(opts.vocab), f"--flags={opts.flags}"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", default="hc_gaussian,hc_gaussian_shx,transformer_nosa",
                        help="comma-separated architectures to compare with --reference")
    parser.add_argument("--reference", default="posnet_transformer_base",
                        help="the Transformer measured in the same run (default: posnet_transformer_base)")
    parser.add_argument("--batch", default="16,48", help="two sentence counts per batch (default: 16,48)")
    parser.add_argument("--length", type=int, default=30, help="tokens per sentence, source and target (30)")
    parser.add_argument("--vocab", type=int, default=8000, help="joined vocabulary size (default: 8000)")
    parser.add_argument("--flags", default="--length-ratio 1.0 --dropout 0.1",
                        help="extra model flags for every architecture (a gamma for HC-ALL)")
    parser.add_argument("--child", metavar="ARCH", help=argparse.SUPPRESS)
    opts = parser.parse_args()

    if opts.child:
        result = measure(opts.child, int(opts.batch), opts.length, opts.vocab, opts.flags.split())
        print(json.dumps(result))
        return

    batches = [int(b) for b in opts.batch.split(",")]
    if len(batches) != 2 or batches[0] >= batches[1] or batches[0] < 1:
        parser.error(f"--batch {opts.batch}: give two increasing sentence counts, e.g. 16,48")
    archs = [opts.reference] + [a for a in opts.archs.split(",") if a and a != opts.reference]
    rows = {}
    for arch in archs:
        small, large = (run_child(arch, b, opts) for b in batches)
        per_token = (large["step_kb"] - small["step_kb"]) / (large["tokens"] - small["tokens"])
        rows[arch] = dict(large, per_token_kb=per_token)
        if not large["exact_peak"]:
            print(f"# {arch}: peak RSS could not be reset; numbers include model construction", file=sys.stderr)

    ref = rows[opts.reference]
    print(f"training step memory, batch {batches[0]} and {batches[1]} x {opts.length} tokens, vocab "
          f"{opts.vocab}; ratios against {opts.reference} measured in this run")
    header = (f"{'arch':28s} {'params':>11s} {'step MiB':>9s} {'ratio':>6s} {'KiB/token':>10s} "
              f"{'tokens/batch':>13s}")
    print(header)
    for arch in archs:
        row = rows[arch]
        print(f"{arch:28s} {row['params']:11,d} {row['step_kb'] / 1024:9.1f} {row['step_kb'] / ref['step_kb']:6.2f} "
              f"{row['per_token_kb']:10.2f} {ref['per_token_kb'] / row['per_token_kb']:12.2f}x")


if __name__ == "__main__":
    main()
