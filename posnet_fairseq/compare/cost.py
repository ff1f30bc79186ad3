"""Cost of each model of a ``posnet-compare`` run, measured one model at a time.

* parameters of the trained checkpoint (shared tensors once), and for
  aPosNet/rPosNet after precomputation (``posnet_fairseq.precompute``: energies
  folded into tables of ``PRECOMPUTE_LENGTH`` positions);
* one training step at a fixed batch (:mod:`posnet_fairseq.benchmark.training_step`,
  a fresh process per model and round): activation memory, peak resident
  memory, target tokens/s;
* decoding speed at forced output lengths
  (:mod:`posnet_fairseq.benchmark.decode_speed`), the models alternating
  within each round;
* decoding speed of the models converted with CTranslate2 (the first, and
  each other that converts), fp32 and int8
  (:mod:`posnet_fairseq.benchmark.ctranslate2_decoding`), with the same
  sources, lengths, beam, batch and one thread, alternating within each round
  too; or why not (not installed, or the first model does not convert);
* the arithmetic behind both (:mod:`posnet_fairseq.benchmark.flops`): FLOPs
  per training token (counted by the training step) and per generated token
  of each trained checkpoint at each output length, from which the report
  gives each model's ceiling against the first.

Medians over rounds; the report divides by the first model's figures from
the same run. Output lengths a model cannot reach are recorded as
``{"beyond": N}`` (its decoder takes N positions).
"""
import statistics

from ..benchmark import decode_speed, training_step
from ..evaluation.evaluate import count_parameters
from ..precompute import DEFAULT_LENGTH as PRECOMPUTE_LENGTH


def parameters(checkpoint, data_bin):
    """{"params": trained model, "precomputed": after folding PosNet energies (None: not applicable)}."""
    from .. import precompute

    result = {"params": count_parameters(checkpoint, data_bin), "precomputed": None}
    _, _, model = precompute.load_checkpoint_model(checkpoint, data_bin)
    if precompute.position_mixers(model):
        length = min([PRECOMPUTE_LENGTH, *[n for n, needed in zip(model.max_positions(),
                                                                   precompute.position_limits(model)) if needed]])
        precompute.precompute_model_(model, length)
        result.update(precomputed=precompute.parameter_counts(model)["model"], precompute_length=length)
    return result


def training_steps(archs, flags, vocab, batch, length, rounds, timed_steps, log):
    """{model: training_step.measure_rounds' record} (medians over ``rounds``, models alternating; ``archs``:
    the models' names, :func:`posnet_fairseq.compare.model_flags.architecture`)."""
    from .model_flags import architecture

    timings = training_step.measure_rounds(archs, batch, length, vocab, flags, timed_steps, rounds,
                                           lambda r: log(f"cost: training-step round {r + 1}/{rounds} done"),
                                           architecture=architecture)
    return {arch: timing.record() for arch, timing in timings.items()}


def decoding_flops(checkpoints, limits, speed_bin, lengths, langs, beam):
    """{arch: {length: FLOPs per generated token}} of each trained checkpoint decoding the speed set's mean
    source sentence (EOS included, rounded as the decoding benchmark does) with ``beam`` rows to each output
    length it can reach (L tokens + EOS)."""
    from .. import precompute
    from ..benchmark import flops
    from .data import split_lengths

    source_length = round(statistics.mean(split_lengths(speed_bin, "test", *langs)) + 1)
    result = {}
    for arch, checkpoint in checkpoints.items():
        reachable = [n for n in lengths if n + 1 <= limits[arch][1]]
        if reachable:
            _, _, model = precompute.load_checkpoint_model(checkpoint, speed_bin)
            per_token = flops.decoding_flops(model, source_length, [n + 1 for n in reachable], beam)
            result[arch] = {n: per_token[n + 1] for n in reachable}
    return result


def decoding(checkpoints, limits, speed_bin, lengths, rounds, results_dir, langs, beam, batch_size, log, cpu=True,
             flags=None):
    """{arch: {length: decode_speed.time_rounds' record ("rate", "cpu_s", "tokens_per_hyp", "rounds") or
    {"beyond": N}}}; on the first GPU unless ``cpu``; ``flags``: {arch: its --arch-generate-flags}."""
    import torch

    torch.set_num_threads(1)  # the models alternate on one core, like the trainings
    decode_speed.quiet()
    result = {arch: {} for arch in checkpoints}
    runnable = {}
    for length in lengths:
        # L tokens plus EOS need L + 1 decoder positions.
        runnable[length] = {arch: path for arch, path in checkpoints.items() if length + 1 <= limits[arch][1]}
        for arch in checkpoints:
            if arch not in runnable[length]:
                result[arch][length] = {"beyond": limits[arch][1]}
    timings = decode_speed.time_rounds(runnable, speed_bin, rounds, results_dir,
                                       lambda r: log(f"cost: decoding round {r + 1}/{rounds} done"), beam=beam,
                                       batch_size=batch_size, source_lang=langs[0], target_lang=langs[1], cpu=cpu,
                                       flags=flags)
    for (arch, length), timing in timings.items():
        result[arch][length] = timing.record()
    return result


def _ctranslate2_engines(checkpoints, limits, speed_bin, work_dir, langs, beam, batch_size, log):
    """({row: decode(length)}, {row: target positions}, why there are none) of the models that convert."""
    import functools

    from ..benchmark import ctranslate2_decoding as ct2

    why = ct2.missing()
    if why:
        return {}, {}, why
    sources = ct2.source_sentences(speed_bin, source_lang=langs[0], target_lang=langs[1])
    first, engines, limit = next(iter(checkpoints)), {}, {}
    for arch, checkpoint in checkpoints.items():
        model_dir = work_dir if arch == first else f"{work_dir}-{arch}"
        refused = ct2.conversion_error(checkpoint, speed_bin, model_dir, source_lang=langs[0], target_lang=langs[1])
        if refused and arch == first:
            return {}, {}, f"the first model does not convert: {refused}"
        if refused:
            log(f"cost: no CTranslate2 rows for {arch} (it does not convert: {refused})")
            continue
        for t in ct2.COMPUTE_TYPES:
            row = ct2.ROW_NAMES[t] if arch == first else f"{arch} {ct2.ROW_NAMES[t]}"
            engines[row] = functools.partial(ct2.Translator(model_dir, t, 1).translate_timed, sources, beam=beam,
                                             batch_size=batch_size)
            limit[row] = limits[arch][1]
    return engines, limit, None


def ctranslate2_decoding(checkpoints, limits, speed_bin, lengths, rounds, work_dir, langs, beam, batch_size, log):
    """{row: {length: decode_speed.time_rounds' record or {"beyond": N}}} of the models converted with CTranslate2,
    fp32 and int8: the first model as "ctranslate2 fp32" / "ctranslate2 int8", each other model that converts
    (Shaw-relative and T5-bias ones) as "ARCH ctranslate2 fp32" / "ARCH ctranslate2 int8"; or {"missing": why}
    (not installed, or the first model is refused)."""
    import torch

    torch.set_num_threads(1)
    engines, limit, why = _ctranslate2_engines(checkpoints, limits, speed_bin, work_dir, langs, beam, batch_size, log)
    if why:
        log(f"cost: no CTranslate2 rows ({why})")
        return {"missing": why}
    runnable = {n: {row: engine for row, engine in engines.items() if n + 1 <= limit[row]} for n in lengths}
    timings = decode_speed.time_rounds(runnable, speed_bin, rounds, None,
                                       lambda r: log(f"cost: CTranslate2 decoding round {r + 1}/{rounds} done"))
    return {row: {n: timings[row, n].record() if (row, n) in timings else {"beyond": limit[row]} for n in lengths}
            for row in engines}
