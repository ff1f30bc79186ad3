"""``results.md`` (one table, the settings and signatures around it, the verdict) and ``results.csv``.

With several seeds (:mod:`posnet_fairseq.compare.seeds`) a model's quality figures are the mean over its
seeds with their standard deviation and each seed's value; its cost was measured once, on its first seed.

Every ratio divides by the first model's figure from the same run: speeds as
model / first (above 1 = faster), memory as model / first (below 1 = less).
Beside each speed ratio, the ceiling (the first model's FLOPs per token over
this model's) and the share of it measured (speed ratio / ceiling), as
:mod:`posnet_fairseq.benchmark.measurements` computes them.
"""
import csv
import os

from ..benchmark.measurements import against, ratio as _ratio
from . import concatenated, seeds as _seeds, stopping, verdict as _verdict
from .records import BucketScore, DecodeCost

# Figures of one seed that several seeds replace by the verdict: the bootstrap's per-seed intervals and p-values.
_PER_SEED_ONLY = ("_mean", "_ci", "_p", "_direction")


def _ceiling(prefix, speed_ratio, model_flops, base_flops):
    """{PREFIX_flops_per_token, PREFIX_ceiling, PREFIX_share}; empty without both FLOP counts."""
    cmp = against(speed_ratio, model_flops, base_flops)
    if cmp is None:
        return {}
    return {f"{prefix}_flops_per_token": model_flops, f"{prefix}_ceiling": cmp.ceiling, f"{prefix}_share": cmp.share}


def _quality(model, outcome, quality):
    """The figures of one trained model (one architecture, one seed): updates, scores, buckets."""
    row = {"updates": outcome.updates, "epochs": outcome.epochs}
    if outcome.converged is not None:
        row["converged"] = outcome.converged
    if outcome.trained_as:
        row["trained_as"] = outcome.trained_as
    system = quality.systems.get(model)
    if system:
        for name, score in (("bleu", system.bleu), ("chrf", system.chrf)):
            row.update({name: score.score, f"{name}_mean": score.mean, f"{name}_ci": score.ci,
                        f"{name}_p": score.p, f"{name}_direction": score.direction})
        row.update(skipped=system.skipped, max_source_positions=system.limits[0],
                   max_target_positions=system.limits[1])
    for bucket in quality.buckets:
        entry = bucket.scores.get(model, BucketScore())
        key = f"bleu_len_{bucket.name}"
        row[key] = (f"beyond its {entry.beyond} positions" if entry.beyond is not None
                    else too_few(bucket) if bucket.too_small else entry.score)
        row[key + "_ci"] = entry.ci
        row[f"length_ratio_{bucket.name}"] = entry.length_ratio
    reference = _kept_reference(quality.buckets)
    within = row.get(f"bleu_len_{reference.name}") if reference else None
    for bucket in quality.buckets:
        beyond = row[f"bleu_len_{bucket.name}"]
        if bucket.beyond_training and isinstance(beyond, float) and isinstance(within, float) and within > 0:
            row[f"bleu_kept_{bucket.name}"] = 100 * beyond / within
    return row


def _kept_reference(buckets):
    """The bucket that BLEU beyond the training lengths is a share of: the longest scored one within them."""
    return next((b for b in reversed(buckets) if not (b.beyond_training or b.concatenated or b.too_small)), None)


def _failure(models, training, quality):
    """Why an architecture has no figures: the first of its seeds' models that failed (named by its seed when
    it has several), as (why, the outcome of that model), or None."""
    for seed, model in models.items():
        why = training[model].failed or quality.failed.get(model)
        if why:
            return (f"seed {seed}: " if len(models) > 1 else "") + why, training[model]
    return None


def _combined(per_seed, seed_list):
    """One architecture's quality figures over its seeds: itself for one seed, else mean, sd and each seed's
    value (:func:`posnet_fairseq.compare.seeds.combine`), converged only when every seed converged."""
    if len(per_seed) == 1:
        return per_seed[0]
    kept = [{k: v for k, v in figures.items() if not k.endswith(_PER_SEED_ONLY) and k != "converged"}
            for figures in per_seed]
    row = _seeds.combine(kept, seed_list, fixed=("max_source_positions", "max_target_positions"))
    if "converged" in per_seed[0]:
        row["converged"] = all(figures["converged"] for figures in per_seed)
    return row


def rows(archs, training, quality, cost, analysis, seed_list=(None,), model_of=lambda arch, seed: arch,
         stops=None):
    """One dict per model with every figure of the run (the CSV's rows); ``training``: {model:
    :class:`~posnet_fairseq.compare.training.TrainOutcome`} with ``model_of(arch, seed)`` the model of ``arch``
    trained with each seed of ``seed_list``; ``quality`` and ``cost``: the run's
    :class:`~posnet_fairseq.compare.records.Quality` and :class:`~posnet_fairseq.compare.records.Cost`
    (the cost by architecture); ``stops``: {model: :func:`posnet_fairseq.compare.stopping.bucket_rows`}."""
    base = archs[0]
    out = []
    for arch in archs:
        row = {"arch": arch}
        models = {seed: model_of(arch, seed) for seed in seed_list}
        failure = _failure(models, training, quality)
        if failure:
            why, outcome = failure
            if not outcome.failed and len(models) == 1:  # trained, not translated
                row.update(updates=outcome.updates, epochs=outcome.epochs)
            row["failed"] = why
            out.append(row)
            continue
        row.update(_combined([dict(_quality(m, training[m], quality), **stopping.columns((stops or {}).get(m, [])))
                              for m in models.values()], list(seed_list)))
        reused = sorted({training[m].reused_from for m in models.values() if training[m].reused_from})
        if reused:
            row["reused_from"] = " ".join(reused)
        if arch in cost.parameters:
            row.update(params=cost.parameters[arch][0], params_precomputed=cost.parameters[arch][1])
        if arch in cost.steps and base in cost.steps:
            s, b = cost.steps[arch], cost.steps[base]
            row.update(train_tokens_per_s=s.tokens_per_s,
                       train_speed_ratio=_ratio(s.tokens_per_s, b.tokens_per_s),
                       train_cpu_speed_ratio=_ratio(s.tokens_per_cpu_s, b.tokens_per_cpu_s),
                       step_memory_mib=s.step_kb / 1024, step_memory_ratio=_ratio(s.step_kb, b.step_kb),
                       activation_kib_per_token=s.saved_bytes / s.tokens / 1024,
                       activation_ratio=_ratio(s.saved_bytes, b.saved_bytes))
            row.update(_ceiling("train", row["train_speed_ratio"], s.flops_per_token, b.flops_per_token))
        flops = cost.decoding_flops
        for length, entry in cost.decoding.get(arch, {}).items():
            if entry.beyond is not None:
                row[f"decode_{length}_sentences_per_s"] = f"beyond its {entry.beyond} positions"
                continue
            base_entry = cost.decoding[base].get(length, DecodeCost())
            row[f"decode_{length}_sentences_per_s"] = entry.rate
            row[f"decode_{length}_ratio"] = _ratio(entry.rate, base_entry.rate)
            row[f"decode_{length}_cpu_ratio"] = _ratio(base_entry.cpu_s, entry.cpu_s)
            row.update(_ceiling(f"decode_{length}", row[f"decode_{length}_ratio"],
                                flops.get(arch, {}).get(length), flops.get(base, {}).get(length)))
        for name, r2 in analysis.get(arch, {}).items():
            row[f"toeplitz_r2_{name}"] = r2
        out.append(row)
    return out


def too_few(bucket):
    return f"too few sentences ({bucket.sentences})"


def write_csv(path, table):
    columns = []
    for row in table:
        columns += [key for key in row if key not in columns]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in table:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _num(value, fmt):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return format(value, fmt)


def _with_ratio(value, ratio, fmt):
    if isinstance(value, str) or value is None:
        return _num(value, fmt)
    return f"{format(value, fmt)} ({_num(ratio, '.2f')})"


def _ceiling_cell(row, prefix):
    ceiling, share = row.get(f"{prefix}_ceiling"), row.get(f"{prefix}_share")
    if ceiling is None:
        return "-"
    return f"{ceiling:.2f}x ({'-' if share is None else format(share, '.0%')})"


def _ctranslate2_line(cost, base, lengths):
    """The CTranslate2 rows: `base` (and each other model that converts) converted and decoded as the models above,
    sentences/s (ratio to `base`)."""
    converted = cost.ctranslate2
    if converted is None:
        return "- CTranslate2: not measured in this run's cost.json (made before it was)."
    if "missing" in converted:
        return f"- CTranslate2: not measured: {converted['missing']}."
    cells = []
    for row, per in converted.items():
        for n in lengths:
            entry, base_entry = per.get(str(n)), cost.decoding.get(base, {}).get(str(n))
            if entry is None or entry.beyond is not None:
                cells.append(f"{row} L={n}: beyond its {entry.beyond if entry else '?'} positions")
                continue
            ratio = _ratio(entry.rate, base_entry.rate if base_entry else None)
            cells.append(f"{row} L={n}: {entry.rate:.1f} sent/s ({_num(ratio, '.2f')})")
    return (f"- CTranslate2: `{base}` converted in-process (a row named after another model: that model; the "
            "Transformer through ctranslate2's FairseqConverter, Shaw-relative and T5-bias models through "
            "posnet_fairseq.benchmark.ctranslate2_relative) and decoded with "
            "the same sources, forced lengths, beam and batch, one thread, alternating within each round; "
            "sentences/s (ratio to `" + base + "`): " + "; ".join(cells) + ".")


def _updates_cell(row, several):
    cell = _seeds.mean_sd(row, "updates", ".0f") if several else _num(row.get("updates"), ",")
    return cell + (" (not converged)" if row.get("converged") is False else "")


def markdown(table, quality, cost, context, seed_list=(None,), stops=None):
    """results.md: the run's settings, the table, what the columns mean, signatures and figures; with
    several seeds each quality figure is mean ± sd over ``seed_list``."""
    base = table[0]["arch"]
    c = cost.settings
    lengths = c["decode_lengths"]
    buckets = quality.buckets
    limit = quality.train_limit
    several = len(seed_list) > 1
    converge = any("converged" in row for row in table)
    header = ["model", *(["updates"] if converge else []), "params", "params, precomputed", "BLEU", "chrF",
              *([] if several else [f"p (BLEU) vs {base}"])]
    header += [f"BLEU {b.label}{' *' if b.beyond_training else ''} (n={b.sentences})" for b in buckets]
    header += ["train tokens/s (ratio)", "train ceiling (share)", "step memory MiB (ratio)"]
    for n in lengths:
        header += [f"decode L={n} sent/s (ratio)", f"decode L={n} ceiling (share)"]
    lines = [f"# posnet-compare: {len(table)} model{'s' if len(table) != 1 else ''}", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table:
        if "failed" in row and "bleu" not in row:
            cells = [f"`{row['arch']}`", f"FAILED: {_one_line(row['failed'])}"] + [""] * (len(header) - 2)
            lines.append("| " + " | ".join(cells) + " |")
            continue
        cells = [f"`{row['arch']}`", *([_updates_cell(row, several)] if converge else []),
                 _num(row.get("params"), ","), _num(row.get("params_precomputed"), ",")]
        for metric in ("bleu", "chrf"):
            if several:
                cells.append(_seeds.mean_sd(row, metric))
                continue
            cells.append(f"{row[metric]:.1f} ({row[metric + '_mean']:.1f} ± {row[metric + '_ci']:.1f})"
                         if row.get(metric) is not None else "-")
        if not several:
            cells.append(("(baseline)" if row["arch"] == base else _num(row.get("bleu_p"), ".4f")
                          + (f" ({row['bleu_direction']})" if row.get("bleu_direction") else "")))
        for b in buckets:
            key = f"bleu_len_{b.name}"
            cells.append(_seeds.mean_sd(row, key) if several else _num(row.get(key), ".1f"))
        cells.append(_with_ratio(row.get("train_tokens_per_s"), row.get("train_speed_ratio"), ",.0f"))
        cells.append(_ceiling_cell(row, "train"))
        cells.append(_with_ratio(row.get("step_memory_mib"), row.get("step_memory_ratio"), ".1f"))
        for n in lengths:
            cells.append(_with_ratio(row.get(f"decode_{n}_sentences_per_s"), row.get(f"decode_{n}_ratio"), ".1f"))
            cells.append(_ceiling_cell(row, f"decode_{n}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        (f"- BLEU / chrF / BLEU a-b: sacreBLEU, the mean ± the standard deviation over the seeds "
         f"{', '.join(map(str, seed_list))} (each seed's value in results.csv, `bleu_seedS`; each seed's bootstrap "
         "interval and p-value against the baseline's same seed in quality.json); whether a difference lies "
         "inside the noise: the Verdict below." if several else
         f"- BLEU / chrF: sacreBLEU on the whole test set, then (in brackets) the bootstrap mean ± the 95% "
         f"confidence half-width; p: paired bootstrap against `{base}` ({quality.samples} resamples, every "
         "model on the same ones; posnet_fairseq.evaluation.bootstrap), two-sided: twice the smaller of P(not "
         "better) and P(not worse), with the direction where it is at most 0.05."),
        *([f"- updates: the updates each model trained{' (mean ± sd over the seeds)' if several else ''}; "
           "(not converged): stopped by the cap of --budget converge before its validation loss stopped improving"
           f"{' (in at least one seed)' if several else ''}."] if converge else []),
        *[f"- `{row['arch']}` shares the training of `{_seeds.split(row['trained_as'], None)[0]}` (the same "
          "architecture, seed and training flags): it differs in its --arch-generate-flags only."
          for row in table if row.get("trained_as")],
        *[f"- `{row['arch']}`: taken from `{row['reused_from']}` by --reuse-from (trained there with the same "
          "data, recipe, budget, seed and flags)."
          for row in table if row.get("reused_from")],
        f"- BLEU a-b (n=N): corpus BLEU on the N test sentences with a source length of a to b "
        f"{quality.length_unit}. * = beyond the training lengths: every training pair has at most {limit} "
        f"{quality.length_unit} per side. A bucket of fewer than {_num(quality.min_bucket_sentences, 'd')} "
        "sentences is merged into its neighbour on the same side of the training lengths; one that cannot be "
        "reads 'too few sentences' and is not scored.",
        *concatenated.legend(quality.concatenated, quality.length_unit),
        ("- params, precomputed: after folding the aPosNet/rPosNet energies into tables of "
         f"{c['precompute_length']} positions (`posnet-precompute`); '-' where nothing is precomputed."
         if c["precompute_length"] else "- params, precomputed: '-': no model of this run has position energies "
         "to fold into tables (`posnet-precompute`)."),
        f"- train tokens/s: one training step (forward, backward, Adam) on {c['step_batch']} x "
        f"{c['step_length']} random tokens, one thread, median over {c['step_rounds']} rounds of "
        f"{c['timed_steps']} steps (on a GPU: fairseq-train's own throughput); step memory: the peak resident "
        f"memory the step adds to the built model. Ratios against `{base}` measured in the same run.",
        f"- decode: fairseq-generate, beam {c['decode_beam']}, {c['decode_sentences']} sentences in "
        f"batches of {c['decode_batch']}, every hypothesis forced to L tokens (+ EOS), one thread, median of "
        f"{c['decode_rounds']} rounds with the models alternating; ratio against `{base}`. CPU timings on a "
        "machine shared with other jobs are noisy; `results.csv` also has the CPU-time ratios.",
        _ctranslate2_line(cost, base, lengths),
        f"- ceiling (share): the speed ratio the model's arithmetic allows against `{base}`, i.e. `{base}`'s "
        "FLOPs per token over the model's (per training token: the step above, forward and backward; per generated "
        "token: beam search to L tokens on the speed sentences' mean source length; matrix products only, "
        "posnet_fairseq.benchmark.flops), and in brackets the share of it the measured ratio reaches (ratio / "
        "ceiling: below 100% the model loses time its arithmetic does not explain).",
        "",
        "Signatures:",
        "",
    ]
    lines += [f"- {name}: `{sig}`" for name, sig in quality.signatures.items()]
    lines += ["", *_length_ratios(table, buckets, several), *_kept(table, buckets, several, quality.length_unit)]
    if stops:
        lines += [*stopping.markdown(stops), ""]
    if quality.verdict is not None:
        reference = _kept_reference(buckets)
        lines += _verdict.lines(quality.verdict, quality.kept, base, list(seed_list), limit, quality.length_unit,
                                reference.label if reference else None)
    lines += ["## Plots", ""]
    for name, title in (("bleu_vs_speed", "BLEU vs decoding speed"), ("bleu_by_length", "BLEU by source length"),
                        ("valid_loss", "Validation loss"),
                        ("position_mixing", "Learned position mixing: mean weight by offset")):
        lines += [f"![{title}](plots/{name}.png)", ""]
    lines += ["Per model, `analysis/ARCH/` holds `posnet-analyze`'s figures and numbers for its checkpoint.", ""]
    return "\n".join(lines)


def _length_ratios(table, buckets, several):
    """The hypothesis / reference length of each model on each bucket (below 1: it stops too early)."""
    out = ["## Length: hypothesis / reference", "",
           "| model | " + " | ".join(f"{b.label}{' *' if b.beyond_training else ''}" for b in buckets) + " |",
           "|" + "---|" * (len(buckets) + 1)]
    for row in table:
        if "failed" not in row:
            out.append(f"| `{row['arch']}` | " + " | ".join(
                _seeds.mean_sd(row, f"length_ratio_{b.name}", ".2f") if several
                else _num(row.get(f"length_ratio_{b.name}"), ".2f") for b in buckets) + " |")
    return out + ["", "(sacreBLEU tokens" + (", mean ± sd over the seeds" if several else "") + ")", ""]


def _kept(table, buckets, several, unit):
    """BLEU on each bucket beyond the training lengths as a share of the model's BLEU on the longest bucket
    within them: how much of its quality a model keeps where it never trained."""
    reference, beyond = _kept_reference(buckets), [b for b in buckets if b.beyond_training and not b.too_small]
    if reference is None or not beyond:
        return []
    out = ["## Beyond the training lengths: BLEU kept", "",
           f"BLEU on each bucket beyond the training lengths, in % of the model's own BLEU on {reference.label} "
           f"{unit}" + (" (per seed, then mean ± sd)" if several else "") + "; the csv's `bleu_kept_BUCKET`.", "",
           "| model | " + " | ".join(f"{b.label} *" for b in beyond) + " |", "|" + "---|" * (len(beyond) + 1)]
    for row in table:
        if "failed" not in row:
            out.append(f"| `{row['arch']}` | " + " | ".join(
                (_seeds.mean_sd(row, key, ".0f") if several else _num(row[key], ".0f")) + "%" if key in row else "-"
                for key in (f"bleu_kept_{b.name}" for b in beyond)) + " |")
    return out + [""]


def _one_line(text):
    return " ".join(text.split()).replace("|", "/")


def write_failed_baseline(out_dir, archs, training, translation_failed, logs, base):
    """results.md and results.csv of a run whose baseline failed (``base``: the model of the baseline that
    failed, the first of ``archs`` or, with seeds, another seed's): each model's outcome and no figure relative
    to another model (every ratio and p-value is against the baseline). Returns the text."""
    table = []
    for arch in archs:
        outcome = training[arch]
        row = {"arch": arch}
        if outcome.failed or arch in translation_failed:
            row["failed"] = outcome.failed or translation_failed[arch]
        else:
            row.update(updates=outcome.updates, epochs=outcome.epochs)
        table.append(row)
    write_csv(os.path.join(out_dir, "results.csv"), table)
    lines = [f"# posnet-compare: the baseline `{base}` FAILED", "",
             f"- baseline (ratios, significance): `{base}` FAILED: "
             f"{_one_line(next(row['failed'] for row in table if row['arch'] == base))}",
             f"- no BLEU, ratio or p-value was computed: each one compares a model with `{base}`, and none is "
             "computed against another model. Fix the baseline (its log is in "
             f"{logs}) and run the same command again: the models that finished are kept.", "",
             "| model | outcome |", "|---|---|"]
    lines += [f"| `{row['arch']}` | " + (f"FAILED: {_one_line(row['failed'])}" if "failed" in row
                                         else f"trained, {row['updates']} updates (not translated)") + " |"
              for row in table]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(text)
    return text


def write(out_dir, archs, training, quality, cost, analysis, context, seed_list=(None,),
          model_of=lambda arch, seed: arch, stops=None):
    table = rows(archs, training, quality, cost, analysis, seed_list, model_of, stops)
    write_csv(os.path.join(out_dir, "results.csv"), table)
    text = markdown(table, quality, cost, context, seed_list, stops)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(text)
    return table, text
