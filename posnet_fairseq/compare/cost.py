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
from ..evaluation.evaluate import count_parameters, train_speed
from ..precompute import DEFAULT_LENGTH as PRECOMPUTE_LENGTH


def parameters(checkpoint, data_bin):
    """{"params": trained model, "precomputed": after folding PosNet energies (None: not applicable)}."""
    from .. import precompute

    result = {"params": count_parameters(checkpoint), "precomputed": None}
    _, _, model = precompute.load_checkpoint_model(checkpoint, data_bin)
    if precompute.position_mixers(model):
        length = min([PRECOMPUTE_LENGTH, *[n for n, needed in zip(model.max_positions(),
                                                                   precompute.position_limits(model)) if needed]])
        precompute.precompute_model_(model, length)
        result.update(precomputed=precompute.parameter_counts(model)["model"], precompute_length=length)
    return result


def training_steps(archs, flags, vocab, batch, length, rounds, timed_steps, log):
    """{arch: medians of training_step.measure_isolated over ``rounds`` (archs alternating)}."""
    runs = {arch: [] for arch in archs}
    for r in range(rounds):
        for arch in archs:
            runs[arch].append(training_step.measure_isolated(arch, batch, length, vocab, flags[arch], timed_steps))
        log(f"cost: training-step round {r + 1}/{rounds} done")
    result = {}
    for arch, rows in runs.items():
        result[arch] = dict(rows[0])
        for key in ("step_kb", "step_s", "step_cpu_s"):
            result[arch][key] = statistics.median(row[key] for row in rows)
        result[arch]["tokens_per_s"] = result[arch]["tokens"] / result[arch]["step_s"]
        result[arch]["tokens_per_cpu_s"] = result[arch]["tokens"] / result[arch]["step_cpu_s"]
    return result


def logged_training_speed(log_path):
    """Target tokens/s of a model's own training: the median of fairseq-train's logged wps."""
    return train_speed(log_path)["wps"]


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


def decoding(checkpoints, limits, speed_bin, lengths, rounds, results_dir, langs, beam, batch_size, log, cpu=True):
    """{arch: {length: {"rate", "cpu_s", "tokens_per_hyp", "rounds"} or {"beyond": N}}} (medians); on the
    first GPU unless ``cpu``."""
    import torch

    torch.set_num_threads(1)  # the models alternate on one core, like the trainings
    decode_speed.quiet()
    result = {arch: {} for arch in checkpoints}
    runnable = {}
    for length in lengths:
        # L tokens plus EOS need L + 1 decoder positions.
        fit = {arch: path for arch, path in checkpoints.items() if length + 1 <= limits[arch][1]}
        for arch in checkpoints:
            if arch not in fit:
                result[arch][length] = {"beyond": limits[arch][1]}
        runnable[length] = fit
    for r in range(rounds):
        for length in lengths:
            runs = decode_speed.time_rounds(runnable[length], speed_bin, [length], 1, results_dir,
                                            beam=beam, batch_size=batch_size, source_lang=langs[0],
                                            target_lang=langs[1], cpu=cpu)
            for (arch, _), (run,) in runs.items():
                result[arch].setdefault(length, {"rounds": []})["rounds"].append(run)
        log(f"cost: decoding round {r + 1}/{rounds} done")
    for arch, per_length in result.items():
        for length, entry in per_length.items():
            if "rounds" in entry:
                entry.update(rate=statistics.median(x["rate"] for x in entry["rounds"]),
                             cpu_s=statistics.median(x["cpu_s"] for x in entry["rounds"]),
                             tokens_per_hyp=entry["rounds"][0]["tokens_per_hyp"])
    return result
