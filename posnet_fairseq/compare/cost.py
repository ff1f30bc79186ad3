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
import functools
import os
import shutil
import statistics
from types import MappingProxyType

from .. import fairseq_log, precompute
from ..benchmark import decode_speed, flops, training_step
from ..evaluation.evaluate import count_parameters
from ..precompute import DEFAULT_LENGTH as PRECOMPUTE_LENGTH
from . import data
from .model_flags import architecture
from .records import Cost, Parameters, StepCost, flops_per_length, frozen, per_length, read_each
from .steps import load_json, require_checkpoints, save_json


def parameters(checkpoint, data_bin) -> Parameters:
    """The trained model's parameters, and after folding PosNet energies (None: not applicable)."""
    trained = count_parameters(checkpoint, data_bin)
    _, _, model = precompute.load_checkpoint_model(checkpoint, data_bin)
    if not precompute.position_mixers(model):
        return Parameters(trained)
    length = min([PRECOMPUTE_LENGTH, *[n for n, needed in zip(model.max_positions(),
                                                               precompute.position_limits(model)) if needed]])
    precompute.precompute_model_(model, length)
    return Parameters(trained, precompute.parameter_counts(model)["model"], length)


def training_steps(archs, flags, vocab, batch, length, rounds, timed_steps, log):
    """{model: StepCost of training_step.measure_rounds' record} (medians over ``rounds``, models alternating;
    ``archs``: the models' names, :func:`posnet_fairseq.compare.model_flags.architecture`)."""
    timings = training_step.measure_rounds(archs, batch, length, vocab, flags, timed_steps, rounds,
                                           lambda r: log(f"cost: training-step round {r + 1}/{rounds} done"),
                                           architecture=architecture)
    return {arch: StepCost(frozen(timing.record())) for arch, timing in timings.items()}


def decoding_flops(checkpoints, limits, speed_bin, lengths, langs, beam):
    """{arch: {length: FLOPs per generated token}} of each trained checkpoint decoding the speed set's mean
    source sentence (EOS included, rounded as the decoding benchmark does) with ``beam`` rows to each output
    length it can reach (L tokens + EOS)."""
    source_length = round(statistics.mean(data.split_lengths(speed_bin, "test", *langs)) + 1)
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


def write_speed_set(data_bin, out_dir, sentences, src, tgt):
    """OUT/speed-bin: the first ``sentences`` test sentences as the split "test", with the dictionaries
    (made again each time: the number of sentences is a setting of the cost measurement), and the training
    split linked: a model may read corpus statistics from it when it loads (the length ratio of a decoder's
    spread test positions, which checkpoints trained before it was stored at training lack)."""
    from fairseq.data import indexed_dataset

    speed = os.path.join(out_dir, data.SPEED_DIR)
    shutil.rmtree(speed, ignore_errors=True)
    os.makedirs(speed)
    for lang in (src, tgt):
        shutil.copyfile(os.path.join(data_bin, f"dict.{lang}.txt"), os.path.join(speed, f"dict.{lang}.txt"))
        dataset = data.load_split(data_bin, "test", src, tgt, lang)
        prefix = os.path.join(speed, f"test.{src}-{tgt}.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap",
                                               vocab_size=len(data.load_dictionary(data_bin, lang)))
        for i in range(min(sentences, len(dataset))):
            builder.add_item(dataset[i])
        builder.finalize(prefix + ".idx")
    for name in os.listdir(data_bin):
        if name.startswith("train.") and name.endswith((".bin", ".idx")):
            os.symlink(os.path.abspath(os.path.join(data_bin, name)), os.path.join(speed, name))
    return speed


def _settings(args, trained):
    """The step "cost"'s settings: how the models ``trained`` are measured."""
    step_length = args.train_max_len or 32
    settings = {"archs": list(trained), "decode_lengths": args.lengths, "decode_sentences": args.decode_sentences,
                "decode_beam": args.decode_beam, "decode_batch": args.decode_batch,
                "decode_rounds": args.decode_rounds, "step_rounds": args.step_rounds,
                "timed_steps": args.timed_steps, "step_length": step_length,
                "step_batch": max(1, args.max_tokens // step_length)}
    own_flags = {arch: args.generate_flags[arch] for arch in trained if args.generate_flags.get(arch)}
    if own_flags:  # only then, so that a run measured before models had their own flags here keeps its cost
        settings["generate_flags"] = own_flags
    if args.plan.device == "cuda":
        settings.update(device=args.plan.name, fp16=args.plan.fp16)
    return settings


def measure(args, steps, info, trained, limits, train_logs, log):
    """OUT/cost.json (the step "cost"), measured again when the models, their checkpoints or the measuring
    settings change. On a GPU (``args.plan``) decoding is timed there and the training speed is
    fairseq-train's own on its GPU (``train_logs``: {arch: its log}); see
    :mod:`posnet_fairseq.compare.devices`."""
    path = os.path.join(steps.out, "cost.json")
    settings = _settings(args, trained)
    step_length, own_flags = settings["step_length"], settings.get("generate_flags", {})
    gpu = args.plan.device == "cuda"
    inputs = {"data": info.data_bin, **{f"checkpoint of {arch}": c for arch, c in trained.items()}}
    why = steps.why_not_done("cost", settings, inputs)
    if why is None:
        log(f"cost: skipped, measured earlier ({path})")
        return Cost.read(load_json(path))
    # A run of some of the models of a finished cost step reads their figures there, beside the baseline they
    # were measured with (after --delete-checkpoints too).
    if steps.done_for_more("cost", settings, inputs, "archs", per_member=("generate_flags",)):
        log(f"cost: skipped, measured earlier with more models ({path})")
        return Cost.read(load_json(path))
    require_checkpoints(trained, f"measuring the cost again ({why})")
    log(f"cost: measured ({why})")
    log("cost: parameters")
    params = {arch: parameters(checkpoint, info.data_bin) for arch, checkpoint in trained.items()}
    log(f"cost: training steps ({settings['step_batch']} x {step_length} tokens, {args.step_rounds} rounds)")
    steps_ = training_steps(list(trained), args.flags, info.vocab, settings["step_batch"], step_length,
                            args.step_rounds, args.timed_steps, log)
    if gpu:  # the training speed is fairseq-train's own on its GPU, in the place of the step's
        steps_ = {arch: s.with_speed(fairseq_log.train_speed(train_logs[arch])["wps"]) if arch in train_logs else s
                  for arch, s in steps_.items()}
    log(f"cost: decoding speed at output lengths {args.lengths} ({args.decode_rounds} rounds)")
    speed_bin = write_speed_set(info.data_bin, steps.out, args.decode_sentences, *info.langs)
    decoded = decoding(trained, limits, speed_bin, args.lengths, args.decode_rounds,
                       os.path.join(steps.out, "gen", "speed"), info.langs, args.decode_beam,
                       args.decode_batch, log, cpu=not gpu, flags=own_flags)
    converted = ctranslate2_decoding(trained, limits, speed_bin, args.lengths, args.decode_rounds,
                                     os.path.join(steps.out, "ctranslate2"), info.langs, args.decode_beam,
                                     args.decode_batch, log)
    log(f"cost: FLOPs per generated token at output lengths {args.lengths}")
    counted = decoding_flops(trained, limits, speed_bin, args.lengths, info.langs, args.decode_beam)
    precompute_lengths = sorted({p.precompute_length for p in params.values() if p.precompute_length})
    result = Cost(MappingProxyType(params), MappingProxyType(steps_),
                  read_each(decoded, per_length), read_each(counted, flops_per_length), frozen(settings),
                  ", ".join(map(str, precompute_lengths)) or None,
                  frozen(converted) if "missing" in converted else read_each(converted, per_length),
                  args.plan.describe())
    save_json(path, result.stored())
    steps.finish("cost", settings, inputs, [path])
    return result
