"""``results.md`` (one table, the settings and signatures around it) and ``results.csv``.

Every ratio divides by the first model's figure from the same run: speeds as
model / first (above 1 = faster), memory as model / first (below 1 = less).
Beside each speed ratio, the ceiling (the first model's FLOPs per token over
this model's, :func:`posnet_fairseq.benchmark.flops.ceiling`) and the share of
it measured (speed ratio / ceiling).
"""
import csv
import os

from ..benchmark import flops


def _ratio(value, base):
    return value / base if value is not None and base else None


def _ceiling(prefix, speed_ratio, model_flops, base_flops):
    """{PREFIX_flops_per_token, PREFIX_ceiling, PREFIX_share}; empty without both FLOP counts."""
    if not model_flops or not base_flops:
        return {}
    ceiling = flops.ceiling(model_flops, base_flops)
    return {f"{prefix}_flops_per_token": model_flops, f"{prefix}_ceiling": ceiling,
            f"{prefix}_share": _ratio(speed_ratio, ceiling)}


def rows(archs, training, quality, cost, analysis):
    """One dict per model with every figure of the run (the CSV's rows)."""
    base = archs[0]
    out = []
    steps, decode, params = cost["training_steps"], cost["decoding"], cost["parameters"]
    arithmetic = cost.get("decoding_flops", {})
    for arch in archs:
        row = {"arch": arch}
        outcome = training.get(arch, {})
        if "failed" in outcome:
            row["failed"] = outcome["failed"]
            out.append(row)
            continue
        row.update(updates=outcome.get("updates"), epochs=outcome.get("epochs"))
        if arch in quality.get("failed", {}):
            row["failed"] = quality["failed"][arch]
        system = quality["systems"].get(arch)
        if system:
            row.update(bleu=system["bleu"]["score"], bleu_mean=system["bleu"]["mean"],
                       bleu_ci=system["bleu"]["ci"], bleu_p=system["bleu"].get("p"),
                       bleu_direction=system["bleu"].get("direction"),
                       chrf=system["chrf"]["score"], chrf_mean=system["chrf"]["mean"],
                       chrf_ci=system["chrf"]["ci"], chrf_p=system["chrf"].get("p"),
                       chrf_direction=system["chrf"].get("direction"), skipped=system["skipped"],
                       max_source_positions=system["limits"][0], max_target_positions=system["limits"][1])
        for bucket in quality["buckets"]:
            entry = bucket["scores"].get(arch, {})
            key = f"bleu_len_{bucket['lo']}_{bucket['hi']}"
            row[key] = (f"beyond its {entry['beyond']} positions" if "beyond" in entry
                        else too_few(bucket) if bucket.get("too_small") else entry.get("score"))
            row[key + "_ci"] = entry.get("ci")
            row[f"length_ratio_{bucket['lo']}_{bucket['hi']}"] = entry.get("length_ratio")
        if arch in params:
            row.update(params=params[arch]["params"], params_precomputed=params[arch]["precomputed"])
        if arch in steps and base in steps:
            s, b = steps[arch], steps[base]
            row.update(train_tokens_per_s=s["tokens_per_s"],
                       train_speed_ratio=_ratio(s["tokens_per_s"], b["tokens_per_s"]),
                       train_cpu_speed_ratio=_ratio(s["tokens_per_cpu_s"], b["tokens_per_cpu_s"]),
                       step_memory_mib=s["step_kb"] / 1024, step_memory_ratio=_ratio(s["step_kb"], b["step_kb"]),
                       activation_kib_per_token=s["saved_bytes"] / s["tokens"] / 1024,
                       activation_ratio=_ratio(s["saved_bytes"], b["saved_bytes"]))
            row.update(_ceiling("train", row["train_speed_ratio"], s.get("flops_per_token"), b.get("flops_per_token")))
        for length, entry in decode.get(arch, {}).items():
            if "beyond" in entry:
                row[f"decode_{length}_sentences_per_s"] = f"beyond its {entry['beyond']} positions"
                continue
            base_entry = decode[base].get(length, {})
            row[f"decode_{length}_sentences_per_s"] = entry["rate"]
            row[f"decode_{length}_ratio"] = _ratio(entry["rate"], base_entry.get("rate"))
            row[f"decode_{length}_cpu_ratio"] = _ratio(base_entry.get("cpu_s"), entry["cpu_s"])
            row.update(_ceiling(f"decode_{length}", row[f"decode_{length}_ratio"],
                                arithmetic.get(arch, {}).get(length), arithmetic.get(base, {}).get(length)))
        for name, r2 in analysis.get(arch, {}).items():
            row[f"toeplitz_r2_{name}"] = r2
        out.append(row)
    return out


def too_few(bucket):
    return f"too few sentences ({bucket['sentences']})"


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


def markdown(table, quality, cost, context):
    """results.md: the run's settings, the table, what the columns mean, signatures and figures."""
    base = table[0]["arch"]
    lengths = cost["decode_lengths"]
    buckets = quality["buckets"]
    limit = quality["train_limit"]
    header = ["model", "params", "params, precomputed", "BLEU", "chrF", f"p (BLEU) vs {base}"]
    header += [f"BLEU {b['lo']}-{b['hi']}{' *' if b['beyond_training'] else ''} (n={b['sentences']})"
               for b in buckets]
    header += ["train tokens/s (ratio)", "train ceiling (share)", "step memory MiB (ratio)"]
    for n in lengths:
        header += [f"decode L={n} sent/s (ratio)", f"decode L={n} ceiling (share)"]
    lines = [f"# posnet-compare: {len(table)} model{'s' if len(table) != 1 else ''}", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table:
        if "failed" in row and "bleu" not in row:
            cells = [f"`{row['arch']}`", f"failed: {row['failed']}"] + [""] * (len(header) - 2)
            lines.append("| " + " | ".join(cells) + " |")
            continue
        cells = [f"`{row['arch']}`", _num(row.get("params"), ","), _num(row.get("params_precomputed"), ",")]
        for metric in ("bleu", "chrf"):
            cells.append(f"{row[metric]:.1f} ({row[metric + '_mean']:.1f} ± {row[metric + '_ci']:.1f})"
                         if row.get(metric) is not None else "-")
        cells.append(("(baseline)" if row["arch"] == base else _num(row.get("bleu_p"), ".4f")
                      + (f" ({row['bleu_direction']})" if row.get("bleu_direction") else "")))
        for b in buckets:
            cells.append(_num(row.get(f"bleu_len_{b['lo']}_{b['hi']}"), ".1f"))
        cells.append(_with_ratio(row.get("train_tokens_per_s"), row.get("train_speed_ratio"), ",.0f"))
        cells.append(_ceiling_cell(row, "train"))
        cells.append(_with_ratio(row.get("step_memory_mib"), row.get("step_memory_ratio"), ".1f"))
        for n in lengths:
            cells.append(_with_ratio(row.get(f"decode_{n}_sentences_per_s"), row.get(f"decode_{n}_ratio"), ".1f"))
            cells.append(_ceiling_cell(row, f"decode_{n}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"- BLEU / chrF: sacreBLEU on the whole test set, then (in brackets) the bootstrap mean ± the 95% "
        f"confidence half-width; p: paired bootstrap against `{base}` ({quality['samples']} resamples, every "
        "model on the same ones; posnet_fairseq.evaluation.bootstrap), the smaller of P(not better) and P(not "
        "worse), with the direction where it is at most 0.05.",
        f"- BLEU a-b (n=N): corpus BLEU on the N test sentences with a source length of a to b "
        f"{quality['length_unit']}. * = beyond the training lengths: every training pair has at most {limit} "
        f"{quality['length_unit']} per side. A bucket of fewer than {quality.get('min_bucket_sentences', '-')} "
        "sentences is merged into its neighbour on the same side of the training lengths; one that cannot be "
        "reads 'too few sentences' and is not scored.",
        "- params, precomputed: after folding the aPosNet/rPosNet energies into tables of "
        f"{cost.get('precompute_length', '-')} positions (`posnet-precompute`); '-' where nothing is precomputed.",
        f"- train tokens/s: one training step (forward, backward, Adam) on {cost['step_batch']} x "
        f"{cost['step_length']} random tokens, one thread, median over {cost['step_rounds']} rounds of "
        f"{cost['timed_steps']} steps (on a GPU: fairseq-train's own throughput); step memory: the peak resident "
        f"memory the step adds to the built model. Ratios against `{base}` measured in the same run.",
        f"- decode: fairseq-generate, beam {cost['decode_beam']}, {cost['decode_sentences']} sentences in "
        f"batches of {cost['decode_batch']}, every hypothesis forced to L tokens (+ EOS), one thread, median of "
        f"{cost['decode_rounds']} rounds with the models alternating; ratio against `{base}`. CPU timings on a "
        "machine shared with other jobs are noisy; `results.csv` also has the CPU-time ratios.",
        f"- ceiling (share): the speed ratio the model's arithmetic allows against `{base}`, i.e. `{base}`'s "
        "FLOPs per token over the model's (per training token: the step above, forward and backward; per generated "
        "token: beam search to L tokens on the speed sentences' mean source length; matrix products only, "
        "posnet_fairseq.benchmark.flops), and in brackets the share of it the measured ratio reaches (ratio / "
        "ceiling: below 100% the model loses time its arithmetic does not explain).",
        "",
        "Signatures:",
        "",
    ]
    lines += [f"- {name}: `{sig}`" for name, sig in quality["signatures"].items()]
    lines += ["", "## Plots", ""]
    for name, title in (("bleu_vs_speed", "BLEU vs decoding speed"), ("bleu_by_length", "BLEU by source length"),
                        ("valid_loss", "Validation loss"),
                        ("position_mixing", "Learned position mixing: mean weight by offset")):
        lines += [f"![{title}](plots/{name}.png)", ""]
    lines += ["Per model, `analysis/ARCH/` holds `posnet-analyze`'s figures and numbers for its checkpoint.", ""]
    return "\n".join(lines)


def write(out_dir, archs, training, quality, cost, analysis, context):
    table = rows(archs, training, quality, cost, analysis)
    write_csv(os.path.join(out_dir, "results.csv"), table)
    text = markdown(table, quality, cost, context)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(text)
    return table, text
