"""Training-step cost of one architecture: memory and throughput, measured in a fresh process.

One training step (forward, backward, Adam) at a fixed batch of random tokens,
with a dictionary of ``vocab`` symbols:

* ``saved_bytes``: bytes of every tensor autograd saves for the backward pass
  (parameters excluded, each storage once). It is what grows with the batch,
  and it is deterministic.
* ``step_kb``: the resident memory the step adds on top of the built model
  (peak RSS reset after building, Linux >= 4.0; ``exact_peak`` says whether the
  reset was permitted). It also counts allocator slack and temporaries.
* with ``timed_steps`` > 0, that many further steps are timed: the median wall
  and process-CPU seconds per step (``step_s``, ``step_cpu_s``); the target
  tokens per second follow as ``tokens / step_s``. One torch thread.

:func:`measure_isolated` runs :func:`measure` in a fresh interpreter
(``python -m posnet_fairseq.benchmark.memory ARCH ...`` prints it as JSON), so
the peak RSS of one architecture never includes another's.
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

from ..plugin import PLUGIN_DIR, subprocess_env


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


def measure(arch, batch, length, vocab, flags=(), timed_steps=0):
    """One training step of ``arch`` on ``batch`` x ``length`` tokens (memory in KiB), then
    ``timed_steps`` timed steps."""
    import torch
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.tasks.translation import TranslationTask

    torch.set_num_threads(1)  # memory does not depend on threads; the cores are shared
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       ["/nonexistent", "--user-dir", PLUGIN_DIR, "--arch", arch, *flags])
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

    def step():
        optimizer.zero_grad()
        logits = model(src, lengths, prev)[0]
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
        loss.backward()
        optimizer.step()

    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in param_storages:
            saved[storage.data_ptr()] = storage.nbytes()  # alive until backward: no address reuse
        return tensor

    before = _rss_kb("VmRSS")
    exact = _reset_peak()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    peak = _rss_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"arch": arch, "tokens": batch * length, "params": params, "saved_bytes": sum(saved.values()),
              "step_kb": peak - before, "exact_peak": exact}
    if timed_steps:
        wall, cpu = [], []
        for _ in range(timed_steps):
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            step()
            wall.append(time.perf_counter() - start_wall)
            cpu.append(time.process_time() - start_cpu)
        result.update(step_s=statistics.median(wall), step_cpu_s=statistics.median(cpu))
    return result


def measure_isolated(arch, batch, length, vocab, flags=(), timed_steps=0):
    """:func:`measure` in a fresh interpreter; raises RuntimeError with its stderr if it fails."""
    command = [sys.executable, "-m", "posnet_fairseq.benchmark.memory", arch, "--batch", str(batch),
               "--length", str(length), "--vocab", str(vocab), "--timed-steps", str(timed_steps),
               f"--flags={' '.join(flags)}"]
    env = subprocess_env(OMP_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"training step of {arch} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description="measure one training step of ARCH; prints JSON")
    parser.add_argument("arch")
    parser.add_argument("--batch", type=int, required=True, help="sentences per batch")
    parser.add_argument("--length", type=int, required=True, help="tokens per sentence, source and target")
    parser.add_argument("--vocab", type=int, required=True, help="joined vocabulary size")
    parser.add_argument("--timed-steps", type=int, default=0, help="further steps to time (default 0)")
    parser.add_argument("--flags", default="", help='extra model flags, given as --flags="..."')
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.arch, args.batch, args.length, args.vocab, args.flags.split(),
                             args.timed_steps)))


if __name__ == "__main__":
    main()
