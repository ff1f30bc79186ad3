"""Decoding speed of fairseq-generate at forced output lengths, on CPU or on a CUDA GPU.

:func:`generate_timed` decodes a binarized split in-process
(``fairseq_cli.generate.main``) with ``--min-len L --max-len-a 0 --max-len-b
L``, so every hypothesis has L tokens plus EOS and every model runs the same
number of decoder steps. It returns fairseq's own sentences/s (generation
only, loading excluded), the output tokens per hypothesis and the process CPU
seconds spent inside ``SequenceGenerator.generate`` (:class:`GenerateClock`): on a
machine shared with other jobs the CPU time is the steadier figure, and it
reads like the wall clock only with one torch thread. On a GPU
(``--device cuda``) the CPU time says nothing about the kernels, which run
asynchronously: there the clock's figure is the wall time inside
``generate`` with the GPU synchronized at both ends (``gpu_s``).

:func:`time_rounds` alternates the checkpoints within each round, so slow
phases of a shared machine hit every model alike, and returns
:class:`~.measurements.DecodeTiming` records (medians over rounds;
``posnet-compare`` times its trained checkpoints with it and formats them).
:mod:`.decode_models` gives untrained models and a corpus (speed does not
depend on the weights): this module's command line (:func:`main`) times
those, and prints each model's ceiling (:mod:`.flops`), the speed ratio its
FLOPs per generated token allow against the baseline row (the first arch, or
``--against``). ``--int8`` adds each arch with int8 linear layers
(:mod:`posnet_fairseq.models.int8`), ``--ctranslate2`` every arch that
converts with CTranslate2 (the Transformer, Shaw-relative and T5-bias models) in fp32 and int8
(:mod:`.ctranslate2_decoding`),
with the same sources, forced lengths, beam, batch and threads. ``--plain-beam ARCHS`` adds those rows
decoded with ``--no-beamable-mm`` as ``ROW plain-beam``: the cross attention's keys and values per
hypothesis, where the default keeps them once per sentence (:mod:`posnet_fairseq.models.beam_shared`), so
that one run times both paths (on a GPU the shared path launches more, smaller kernels). ``--fbgemm ARCHS``
adds int8 rows decoded with FBGEMM's products as ``ROW fbgemm``, where the default engine is the machine's
(``--int8-engine auto``, :mod:`posnet_fairseq.models.int8`)::

    python -m posnet_fairseq.benchmark.decode_speed --threads 1 --sentences 32 --rounds 1 --lengths 30,80,200
    python -m posnet_fairseq.benchmark.decode_speed --archs transformer,hc_gaussian --lengths 30,80
    python -m posnet_fairseq.benchmark.decode_speed --quick         # smoke test: tiny models
    python -m posnet_fairseq.benchmark.decode_speed --threads 1 --archs transformer,aan_plus_avg --int8 \\
        --ctranslate2 --against 'ctranslate2 int8' --lengths 30,80,200
    python -m posnet_fairseq.benchmark.decode_speed --device cuda --archs transformer,aan_plus_avg \\
        --plain-beam transformer,aan_plus_avg --batch-size 128 --lengths 80
"""
import logging
import os
import time

from ..models.int8 import engine_overrides
from ..plugin import PLUGIN_DIR
from ..sites import dest
from .decode_models import ctranslate2_rows, fairseq_rows, mean_source_length, synthetic_data_bin
from .measurements import DecodeTiming

# The variants of a fairseq row, each decoding the row's checkpoint with fairseq-generate flags of its own:
# {option: (the suffix of its rows, the flags)}. --plain-beam: the cross attention per hypothesis; --fbgemm: an
# int8 row's products in FBGEMM, torch's default engine on x86.
VARIANTS = {
    "--plain-beam": (" plain-beam", ("--no-beamable-mm",)),
    "--fbgemm": (" fbgemm", tuple(engine_overrides("fbgemm"))),
}


def quiet():
    """Warnings only: fairseq-generate's own basicConfig(INFO) is then a no-op."""
    logging.basicConfig(level=logging.WARNING, force=True)


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


class GenerateClock:
    """Seconds spent inside SequenceGenerator.generate (all calls, summed): process CPU seconds, and wall
    seconds with CUDA synchronized before and after each call (the GPU's time, where CUDA is in use)."""

    cpu_seconds = 0.0
    wall_seconds = 0.0
    _installed = False

    @classmethod
    def install(cls):
        if cls._installed:
            return
        from fairseq.sequence_generator import SequenceGenerator

        import torch

        inner = SequenceGenerator.generate

        def synchronize():
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()

        def timed(self, *a, **kw):
            synchronize()
            start, wall_start = time.process_time(), time.perf_counter()
            try:
                return inner(self, *a, **kw)
            finally:
                synchronize()
                cls.cpu_seconds += time.process_time() - start
                cls.wall_seconds += time.perf_counter() - wall_start

        SequenceGenerator.generate = timed
        cls._installed = True


def generate_timed(data_bin, checkpoint, length, results_dir, beam=4, batch_size=32, subset="test",
                   source_lang="src", target_lang="tgt", cpu=True, flags=()):
    """One fairseq-generate run at output length ``length``; returns {"rate": sentences/s,
    "tokens_per_hyp": output tokens per hypothesis incl. EOS, "cpu_s": CPU seconds generating}, and with
    ``cpu=False`` "gpu_s": wall seconds generating, the GPU synchronized (:class:`GenerateClock`). ``flags``:
    the model's own fairseq-generate flags (e.g. --model-overrides); the beam, batch and forced length
    here come after them, so they win where both are given."""
    from fairseq import options
    from fairseq_cli import generate as fairseq_generate

    GenerateClock.install()
    gen_args = options.parse_args_and_arch(options.get_generation_parser(), [
        data_bin, *flags, "--user-dir", PLUGIN_DIR, "--path", checkpoint, "--source-lang", source_lang,
        "--target-lang", target_lang, "--gen-subset", subset, "--beam", str(beam),
        "--batch-size", str(batch_size), "--required-batch-size-multiple", "1",
        "--min-len", str(length), "--max-len-a", "0", "--max-len-b", str(length),
        "--num-workers", "0", "--results-path", results_dir, *(["--cpu"] if cpu else []),
    ])
    # The summary line is logged at INFO by "fairseq_cli.generate": only that
    # logger speaks at INFO, to the capture handler alone.
    capture = _Capture()
    gen_logger = logging.getLogger("fairseq_cli.generate")
    gen_logger.addHandler(capture)
    gen_logger.setLevel(logging.INFO)
    gen_logger.propagate = False
    cpu_before, wall_before = GenerateClock.cpu_seconds, GenerateClock.wall_seconds
    try:
        fairseq_generate.main(gen_args)
    finally:
        gen_logger.removeHandler(capture)
    # "Translated 128 sentences (3,968 tokens) in 4.1s (31.05 sentences/s, 961.6 tokens/s)"
    line = next(m for m in capture.messages if m.startswith("Translated"))
    sentences = int(line.split()[1].replace(",", ""))
    tokens = int(line.split("(")[1].split()[0].replace(",", ""))
    result = {"rate": float(line.split("(")[2].split()[0]), "tokens_per_hyp": tokens / sentences,
              "cpu_s": GenerateClock.cpu_seconds - cpu_before}
    if not cpu:
        result["gpu_s"] = GenerateClock.wall_seconds - wall_before
    return result


def time_rounds(runnable, data_bin, rounds, results_dir, on_round=None, flags=None, **generate_kw):
    """{(name, length): :class:`~.measurements.DecodeTiming`} for ``runnable`` ({length: {name: checkpoint}}, a
    checkpoint being a path for fairseq-generate or a callable ``decode(length)`` returning the same record,
    e.g. CTranslate2's): each round times every length, and at each length the checkpoints in turn;
    ``on_round(round_index)`` is called after each round; ``flags``: {name: its own fairseq-generate flags}."""
    runs = {(name, length): [] for length, checkpoints in runnable.items() for name in checkpoints}
    for r in range(rounds):
        for length, checkpoints in runnable.items():
            for name, path in checkpoints.items():
                runs[name, length].append(path(length) if callable(path) else generate_timed(
                    data_bin, path, length, results_dir, flags=(flags or {}).get(name, ()), **generate_kw))
        if on_round is not None:
            on_round(r)
    return {key: DecodeTiming(rows) for key, rows in runs.items()}


def parse_args(argv=None):
    import argparse

    from . import FAMILIES

    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.benchmark.decode_speed",
                                description=__doc__.split("\n\n")[0] + " Ratios against the first --archs.")
    p.add_argument("--archs", default=",".join(FAMILIES),
                   help="comma-separated presets, without the size for those that have one (--size adds it); the "
                   "first is the baseline (default: the Transformer, the -SA ceiling and every family)")
    p.add_argument("--size", default="base", choices=["tiny", "small", "base", "big"])
    p.add_argument("--lengths", default="30", help="forced output lengths in tokens, comma-separated (default: 30)")
    p.add_argument("--sentences", type=int, default=128, help="source sentences decoded per run (default: 128)")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the models alternate in each (default: 5)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where fairseq-generate decodes; on "
                   "cuda the ratios divide GPU seconds (wall time, synchronized) instead of CPU seconds "
                   "(default: cpu)")
    p.add_argument("--workdir", default="/tmp/decode_speed", help="corpus, checkpoints and outputs")
    p.add_argument("--profile", metavar="ARCHS", default="", help="after the timing rounds, torch.profiler of one "
                   "run of each of these comma-separated --archs at the last length: the operators by their own "
                   "CPU time")
    p.add_argument("--int8", action="store_true", help="also each arch with int8 linear layers (posnet-quantize), "
                   "as the row ARCH-int8")
    p.add_argument("--ctranslate2", action="store_true", help="also every arch that converts with CTranslate2 "
                   "(requirements/ctranslate2.txt), fp32 and int8: the first as the rows ctranslate2 fp32 / "
                   "ctranslate2 int8, the others as ARCH ctranslate2 fp32 / int8, on --device")
    p.add_argument("--plain-beam", metavar="ARCHS", default="", help="also these comma-separated --archs (or "
                   "their -int8 rows) decoded with --no-beamable-mm, the cross attention per hypothesis, as the "
                   "rows 'ARCH plain-beam' (default: none; the other rows keep it once per sentence)")
    p.add_argument("--fbgemm", metavar="ARCHS", default="", help="also these comma-separated -int8 rows (ARCH-int8 "
                   "with --int8) decoded with FBGEMM's int8 products (--int8-engine fbgemm), as the rows 'ARCH-int8 "
                   "fbgemm' (default: none; the other rows take the machine's engine, --int8-engine auto)")
    p.add_argument("--against", metavar="ROW", help="the row the ratios divide by (default: the first arch), e.g. "
                   "'ctranslate2 int8'")
    p.add_argument("--quick", action="store_true", help="smoke test: tiny models, 32 sentences, length 8, one round")
    args, model_flags = p.parse_known_args(argv)
    if model_flags and model_flags[0] == "--":
        model_flags = model_flags[1:]
    args.model_flags = model_flags
    if args.quick:
        args.size, args.sentences, args.lengths, args.rounds = "tiny", 32, "8", 1
    args.names = [a.strip() for a in args.archs.split(",") if a.strip()]
    try:
        args.lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        p.error(f"--lengths {args.lengths}: give whole numbers, comma-separated")
    args.profile = [a.strip() for a in args.profile.split(",") if a.strip()]
    args.variants = {option: [a.strip() for a in getattr(args, dest(option)).split(",") if a.strip()]
                     for option in VARIANTS}
    _refuse(p, args)
    return args


def _refuse(p, args):
    """``p.error`` for rows the options cannot make: CPU-only rows on a GPU, rows named that are not measured."""
    if args.device == "cuda":
        # int8 linear layers are torch's CPU dynamic quantization; the profile of operators by their CPU time
        # is a CPU measurement (the CTranslate2 rows run on the GPU too).
        for flag, given in (("--int8", args.int8), ("--profile", args.profile)):
            if given:
                p.error(f"{flag} measures CPU decoding: leave it out with --device cuda")
    for flag, names in (("--profile", args.profile), *args.variants.items()):
        for name in names:
            if name not in args.names and not (args.int8 and name.endswith("-int8") and name[:-5] in args.names):
                p.error(f"{flag} {name} is not among --archs" + (" (nor their -int8 rows)" if args.int8 else ""))
    for name in args.variants["--fbgemm"]:
        if not name.endswith("-int8"):
            p.error(f"--fbgemm {name}: give an int8 row (ARCH-int8, with --int8); the engine runs int8 products only")


def fairseq_row(args, archs, name):
    """The row of ``name``, an arch as --archs names it or its ``-int8`` row (--profile, :data:`VARIANTS`)."""
    from . import resolve

    if name.endswith("-int8") and name not in args.names:
        return resolve(name[: -len("-int8")], args.size) + "-int8"
    return archs[args.names.index(name)]


def variant_rows(args, archs, checkpoints, params, limit, arithmetic):
    """{row: its fairseq-generate flags} of the rows of :data:`VARIANTS` (--plain-beam, --fbgemm), each added to
    ``checkpoints`` (the same checkpoint as its row) and to the row's ``params``, ``limit`` and ``arithmetic`` in
    place."""
    flags = {}
    for option, names in args.variants.items():
        suffix, row_flags = VARIANTS[option]
        for name in names:
            row = fairseq_row(args, archs, name)
            variant = row + suffix
            checkpoints[variant], params[variant], limit[variant] = checkpoints[row], params[row], limit[row]
            arithmetic.update({(variant, n): arithmetic[row, n] for n in args.lengths if (row, n) in arithmetic})
            flags[variant] = row_flags
    return flags


def _load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main(argv=None):
    import torch

    from . import decode_tables, resolve

    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible to torch (torch.cuda.is_available() is False)")
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    archs = [resolve(name, args.size) for name in args.names]
    quiet()
    data_bin = synthetic_data_bin(args.workdir, args.sentences)
    source_length = round(mean_source_length(args.workdir, args.sentences))
    checkpoints, params, limit, arithmetic = fairseq_rows(args, archs, data_bin, source_length)
    row_flags = variant_rows(args, archs, checkpoints, params, limit, arithmetic)
    engines, engine_arch, ct2_rows = ctranslate2_rows(args, checkpoints, archs, data_bin) if args.ctranslate2 \
        else ({}, {}, [])
    for row, arch in engine_arch.items():  # the converted model's size, positions and arithmetic
        params[row], limit[row] = params[arch], limit[arch]
        arithmetic.update({(row, n): arithmetic[arch, n] for n in args.lengths if (arch, n) in arithmetic})
    names = list(checkpoints) + list(engines)
    # {length: the rows whose decoder takes L + 1 positions}
    runnable = {length: {row: {**checkpoints, **engines}[row] for row in names if (row, length) in arithmetic}
                for length in args.lengths}
    if any(archs[0] not in runnable[length] for length in args.lengths):
        raise SystemExit(f"--lengths: {archs[0]} (the baseline) takes at most {limit[archs[0]]} target positions")
    base = args.against or archs[0]
    if base not in names:
        raise SystemExit(f"--against {base}: not among the rows measured ({', '.join(names)})")

    device = f"GPU ({torch.cuda.get_device_name()}, torch {torch.__version__})" if args.device == "cuda" else "CPU"
    print(f"# decode speed: {args.sentences} sentences (mean source length {source_length} with EOS), "
          f"beam {args.beam}, batch {args.batch_size}, {device}, torch threads {torch.get_num_threads()}, "
          f"{os.cpu_count()} cores, {args.rounds} rounds")
    print(f"# load average at start: {_load_average()}")
    start = time.time()
    results_dir = os.path.join(args.workdir, "out")
    runs = time_rounds(runnable, data_bin, args.rounds, results_dir, flags=row_flags, beam=args.beam,
                       batch_size=args.batch_size, cpu=args.device == "cpu",
                       on_round=lambda r: print(f"# round {r + 1}/{args.rounds} done after {time.time() - start:.0f}s, "
                                                f"load {_load_average()}", flush=True))

    decode_tables.print_tables(runs, names, base, args.lengths, args.sentences, params, limit, arithmetic, ct2_rows,
                               clock="GPU" if args.device == "cuda" else "CPU")
    print(f"\n# load average at end: {_load_average()}; wall {time.time() - start:.0f}s")

    for name in args.profile:
        arch = fairseq_row(args, archs, name)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            generate_timed(data_bin, checkpoints[arch], args.lengths[-1], results_dir, beam=args.beam,
                           batch_size=args.batch_size)
        print(f"\n# torch.profiler of one run of {arch} (length {args.lengths[-1]}), operators by own CPU time")
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
