"""One training step, measured: the one definition the benchmarks, ``posnet-compare`` and the tests use.

A step is fairseq's model forward, a label-smoothed cross entropy (0.1),
backward and an Adam step (betas 0.9, 0.98) on a fixed batch of random tokens
(``batch`` sentences of ``length`` tokens on each side, a dictionary of
``vocab`` symbols), the model built from its preset as fairseq-train builds
it, dropout included. :class:`TrainingStep` holds the model, the optimizer
and the batch; :func:`measure` runs it and reports:

* ``saved_bytes``: bytes of every tensor autograd saves for the backward pass
  in the first step (parameters excluded, each storage once). It is what
  grows with the batch, and it is deterministic.
* ``step_kb``: the resident memory the first step adds on top of the built
  model (peak RSS reset after building, Linux >= 4.0; ``exact_peak`` says
  whether the reset was permitted). It also counts allocator slack and
  temporaries.
* ``flops_per_token``: FLOPs of the first step (forward and backward,
  :func:`.flops.count`) per target token.
* with ``timed_steps`` > 0, after ``warmup`` untimed steps, that many timed
  steps: the median wall and process-CPU seconds per step (``step_s``,
  ``step_cpu_s``); target tokens per second follow as ``tokens / step_s``.

The first step is never timed: it runs under the saved-tensor hook and the
FLOP counter. :func:`measure_isolated` runs :func:`measure` in a fresh
interpreter (``python -m posnet_fairseq.benchmark.training_step ARCH ...``
prints it as JSON), so the peak RSS of one architecture never includes
another's.
"""
import argparse
import json
import resource
import statistics
import subprocess
import time

from ..plugin import PLUGIN_DIR, subprocess_env
from ..process_pool import python_command
from .measurements import StepTiming


def dictionary(size, padding_factor=8):
    """A fairseq Dictionary of ``size`` symbols ``w0``.. after the specials."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(size):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=padding_factor)
    return d


def parse_train_args(argv):
    """fairseq-train's arguments for ``argv`` (no data directory needed), with this plugin."""
    from fairseq import options

    return options.parse_args_and_arch(options.get_training_parser(),
                                       ["/nonexistent-data", "--user-dir", PLUGIN_DIR, *argv])


def build_model(argv, dictionary, seed):
    """(model, task): the model fairseq-train would build from ``argv`` with ``dictionary`` on both sides,
    initialised with ``seed``."""
    import torch
    from fairseq.tasks.translation import TranslationTask

    args = parse_train_args(argv)
    task = TranslationTask(args, dictionary, dictionary)
    torch.manual_seed(seed)
    return task.build_model(args), task


def build_without_data(argv, dictionary, seed):
    """:func:`build_model` for a step measured or a flag checked without the training set, from which
    fairseq-train computes the length ratio: a model that needs it (a cross-attention mixer's anchors, a
    decoder's spread test positions) is built with a placeholder ratio of 1, which moves where those positions
    point, not what a step costs or which flags parse."""
    from ..data.length_ratio import NoTrainingData

    try:
        return build_model(argv, dictionary, seed)
    except NoTrainingData:
        return build_model([*argv, "--length-ratio", "1"], dictionary, seed)


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


class TrainingStep:
    """``arch`` built at random (seed 0) with Adam and a batch maker on ``device``; calling it runs one step.

    ``precision``: fp32, amp (fp16 autocast with a gradient scaler, as fairseq's
    ``--amp``; CUDA only) or bf16 (bf16 autocast).
    """

    def __init__(self, arch, batch, length, vocab, flags=(), device="cpu", precision="fp32"):
        import torch

        if precision == "amp" and device != "cuda":
            raise ValueError("precision amp needs device cuda (fp16 autocast with a gradient scaler); "
                             "use fp32 or bf16")
        self.arch, self.sentences, self.length = arch, batch, length
        self.device = torch.device(device)
        self.dictionary = dictionary(vocab)
        model, _ = build_without_data(["--arch", arch, *flags], self.dictionary, seed=0)
        self.model = model.to(self.device).train()
        self.params = sum(p.numel() for p in self.model.parameters())
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4, betas=(0.9, 0.98))
        self.scaler = torch.amp.GradScaler("cuda") if precision == "amp" else None
        self.autocast = {"amp": torch.float16, "bf16": torch.bfloat16}.get(precision)
        self.generator = torch.Generator().manual_seed(1)
        self.batch = self.random_batch(batch)

    def random_batch(self, sentences):
        """(source tokens, source lengths, decoder input, target): random sentences of ``length`` tokens
        ending in EOS, on the device."""
        import torch

        d, n = self.dictionary, self.length
        src = torch.randint(d.nspecial, len(d), (sentences, n), generator=self.generator)
        src[:, -1] = d.eos()
        tgt = torch.randint(d.nspecial, len(d), (sentences, n), generator=self.generator)
        tgt[:, -1] = d.eos()
        prev = torch.cat([torch.full((sentences, 1), d.eos()), tgt[:, :-1]], dim=1)
        lengths = torch.full((sentences,), n)
        return [t.to(self.device) for t in (src, lengths, prev, tgt)]

    def __call__(self, batch=None):
        import torch

        src, lengths, prev, tgt = self.batch if batch is None else batch
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.autocast or torch.float32, enabled=self.autocast is not None):
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
            import torch

            torch.cuda.synchronize()

    @property
    def tokens(self):
        return self.sentences * self.length

    def first_step(self):
        """Runs the first step under the saved-tensor hook and the FLOP counter:
        {"saved_bytes", "step_kb", "exact_peak", "flops_per_token"}."""
        import torch

        from .flops import count

        param_storages = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        saved = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in param_storages:
                saved[storage.data_ptr()] = storage.nbytes()  # alive until backward: no address reuse
            return tensor

        before = _rss_kb("VmRSS")
        exact = _reset_peak()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            flops, _ = count(self)
        self.sync()
        peak = _rss_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"saved_bytes": sum(saved.values()), "step_kb": peak - before, "exact_peak": exact,
                "flops_per_token": flops / self.tokens}

    def time(self, steps, warmup=0):
        """(median wall seconds, median process-CPU seconds) per step over ``steps`` steps after
        ``warmup`` untimed ones."""
        for _ in range(warmup):
            self()
        self.sync()
        wall, cpu = [], []
        for _ in range(steps):
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            self()
            self.sync()
            wall.append(time.perf_counter() - start_wall)
            cpu.append(time.process_time() - start_cpu)
        return statistics.median(wall), statistics.median(cpu)


def measure(arch, batch, length, vocab, flags=(), timed_steps=0, warmup=0, device="cpu", precision="fp32"):
    """The first step of :class:`TrainingStep` measured (memory, FLOPs), then ``warmup`` untimed and
    ``timed_steps`` timed steps; one torch thread on CPU."""
    import torch

    if device == "cpu":
        torch.set_num_threads(1)  # memory does not depend on threads; the cores are shared
    step = TrainingStep(arch, batch, length, vocab, flags, device, precision)
    result = {"arch": arch, "tokens": step.tokens, "params": step.params, **step.first_step()}
    if timed_steps:
        result["step_s"], result["step_cpu_s"] = step.time(timed_steps, warmup)
    return result


def measure_isolated(arch, batch, length, vocab, flags=(), timed_steps=0, warmup=0):
    """:func:`measure` on CPU in a fresh interpreter; raises RuntimeError with its stderr if it fails."""
    command = python_command("posnet_fairseq.benchmark.training_step", arch, "--batch", str(batch),
                             "--length", str(length), "--vocab", str(vocab), "--timed-steps", str(timed_steps),
                             "--warmup", str(warmup), f"--flags={' '.join(flags)}")
    env = subprocess_env(OMP_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"training step of {arch} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_rounds(archs, batch, length, vocab, flags, timed_steps, rounds, on_round=None, architecture=None):
    """{arch: :class:`~.measurements.StepTiming`} of :func:`measure_isolated` over ``rounds`` rounds, the archs
    alternating within each (``flags[arch]``: its model flags); ``on_round(round_index)`` after each round;
    ``architecture(name)``: the architecture a name of ``archs`` builds (default: the name)."""
    runs = {arch: [] for arch in archs}
    for r in range(rounds):
        for arch in archs:
            runs[arch].append(measure_isolated(architecture(arch) if architecture else arch, batch, length, vocab,
                                               flags[arch], timed_steps))
        if on_round is not None:
            on_round(r)
    return {arch: StepTiming(rows) for arch, rows in runs.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m posnet_fairseq.benchmark.training_step",
                                     description="measure one training step of ARCH on CPU; prints JSON")
    parser.add_argument("arch")
    parser.add_argument("--batch", type=int, required=True, help="sentences per batch")
    parser.add_argument("--length", type=int, required=True, help="tokens per sentence, source and target")
    parser.add_argument("--vocab", type=int, required=True, help="joined vocabulary size")
    parser.add_argument("--timed-steps", type=int, default=0, help="further steps to time (default 0)")
    parser.add_argument("--warmup", type=int, default=0, help="untimed steps before them (default 0)")
    parser.add_argument("--flags", default="", help='extra model flags, given as --flags="..."')
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.arch, args.batch, args.length, args.vocab, args.flags.split(), args.timed_steps,
                             args.warmup)))


if __name__ == "__main__":
    main()
