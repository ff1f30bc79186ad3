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
from . import columns, seeds as _seeds, stopping, test_groups, verdict as _verdict
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
        key = columns.BUCKET_BLEU.key_of(bucket.name)
        row[key] = (f"beyond its {entry.beyond} positions" if entry.beyond is not None
                    else too_few(bucket) if bucket.too_small else entry.score)
        row[key + "_ci"] = entry.ci
        row[columns.LENGTH_RATIO.key_of(bucket.name)] = entry.length_ratio
    reference = _kept_reference(quality.buckets)
    within = row.get(columns.BUCKET_BLEU.key_of(reference.name)) if reference else None
    for bucket in quality.buckets:
        beyond = row[columns.BUCKET_BLEU.key_of(bucket.name)]
        if bucket.beyond_training and isinstance(beyond, float) and isinstance(within, float) and within > 0:
            kept = test_groups.table_kept(quality.test_groups, bucket.name, model, 100 * beyond / within)
            if kept is not None:  # --test-groups: none where no group of the bucket is in the reference
                row[columns.KEPT.key_of(bucket.name)] = kept
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
    :class:`~posnet_fairseq.compare.records.TrainOutcome`} with ``model_of(arch, seed)`` the model of ``arch``
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
            row.update(params=cost.parameters[arch].params, params_precomputed=cost.parameters[arch].precomputed)
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


def markdown(table, quality, cost, context, seed_list=(None,), stops=None):
    """results.md: the run's settings, the table (:mod:`posnet_fairseq.compare.columns`), what the columns
    mean, signatures and figures; with several seeds each quality figure is mean ± sd over ``seed_list``."""
    view = columns.View(table[0]["arch"], list(seed_list), quality, cost, any("converged" in row for row in table))
    made = columns.table(view)
    lines = [f"# posnet-compare: {len(table)} model{'s' if len(table) != 1 else ''}", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    lines += ["", "| " + " | ".join(header for _, header, _ in made) + " |", "|" + "---|" * len(made)]
    for row in table:
        if "failed" in row and "bleu" not in row:
            cells = [f"`{row['arch']}`", f"FAILED: {_one_line(row['failed'])}"] + [""] * (len(made) - 2)
        else:
            cells = [column.cell(row, view, key) for column, _, key in made]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *columns.legend(view, table), "", "Signatures:", ""]
    lines += [f"- {name}: `{sig}`" for name, sig in quality.signatures.items()]
    ratio_note = "(sacreBLEU tokens" + (", mean ± sd over the seeds" if view.several else "") + ")"
    lines += ["", *_bucket_table(columns.LENGTH_RATIO, view, table, quality.buckets,
                                 "## Length: hypothesis / reference", "", ratio_note), *_kept(view, table)]
    if stops:
        lines += [*stopping.markdown(stops), ""]
    lines += verdict_section(quality, view)
    lines += ["## Plots", ""]
    for name, title in (("bleu_vs_speed", "BLEU vs decoding speed"), ("bleu_by_length", "BLEU by source length"),
                        ("valid_loss", "Validation loss"),
                        ("position_mixing", "Learned position mixing: mean weight by offset")):
        lines += [f"![{title}](plots/{name}.png)", ""]
    lines += ["Per model, `analysis/ARCH/` holds `posnet-analyze`'s figures and numbers for its checkpoint.", ""]
    return "\n".join(lines)


def verdict_section(quality, view):
    """results.md's Verdict section (:mod:`posnet_fairseq.compare.verdict`); none for a run not judged."""
    if quality.verdict is None:
        return []
    reference = _kept_reference(quality.buckets)
    return _verdict.lines(quality.verdict, quality.kept, view.base, list(view.seed_list), quality.train_limit,
                          quality.length_unit, reference.label if reference else None)


def _bucket_table(column, view, table, buckets, title, intro, note):
    """A table of one figure per model and bucket (``column``, over ``buckets``): ``title``, ``intro`` (a
    paragraph, or "" for none), the table, ``note`` under it."""
    out = [title, ""] + ([intro, ""] if intro else [])
    out += ["| model | " + " | ".join(column.header(view, b) for b in buckets) + " |",
            "|" + "---|" * (len(buckets) + 1)]
    for row in table:
        if "failed" not in row:
            out.append(f"| `{row['arch']}` | " + " | ".join(
                column.cell(row, view, column.key_of(b.name)) for b in buckets) + " |")
    return out + [""] + ([note, ""] if note else [])


def _kept(view, table):
    """BLEU on each bucket beyond the training lengths as a share of the model's BLEU on the longest bucket
    within them: how much of its quality a model keeps where it never trained."""
    buckets, unit = view.quality.buckets, view.quality.length_unit
    reference, beyond = _kept_reference(buckets), [b for b in buckets if b.beyond_training and not b.too_small]
    if reference is None or not beyond:
        return []
    intro = (f"BLEU on each bucket beyond the training lengths, in % of the model's own BLEU on {reference.label} "
             f"{unit}" + (" (per seed, then mean ± sd)" if view.several else "") + "; the csv's `bleu_kept_BUCKET`.")
    return _bucket_table(columns.KEPT, view, table, beyond, "## Beyond the training lengths: BLEU kept", intro,
                         test_groups.note(view.quality.test_groups, reference.label))


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
