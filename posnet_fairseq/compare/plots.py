"""The PNG figures of a ``posnet-compare`` run (matplotlib, Agg backend).

Each function draws one figure from what ``results.json`` saves (the run's table rows, length buckets,
validation curves and mixing profiles), saves it and returns the matplotlib Figure (the tests read the
plotted data back from it). The figures stay readable with 20 or more models:

* what a model scores at several points (BLEU per length bucket, attention weight per offset) is a
  model x point heat map, one row per model, every cell written or coloured on its own;
* the validation curves are small multiples: one panel per model, the baseline dashed beside it;
* the one scatter plot, BLEU against speed, gives each model a colour no other model has
  (:func:`palette`) and a number written beside its point and in the legend.

With several seeds (results.json's ``seeds``) a model's point is its mean BLEU with error bars of one
standard deviation over the seeds and each seed's BLEU beside it, a heat-map cell reads mean ± sd, and each
validation panel draws every seed's curve.

The baseline is the run's first model, as in results.md. :func:`replot` redraws every figure from a
saved ``results.json`` (``python -m posnet_fairseq.compare.plots DIR/results.json``), without training,
translating or scoring again.
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import SymLogNorm, TwoSlopeNorm, to_rgba  # noqa: E402

from .columns import BLEU, BUCKET_BLEU, DECODE_SPEED  # noqa: E402
from .concatenated import bucket_label, bucket_name, plot_note  # noqa: E402
from .seeds import several  # noqa: E402

MARKERS = "osD^vP*Xh<>p"
# Beyond 20 models the qualitative maps are chained: tab20b and tab20c share no colour with tab20.
QUALITATIVE = ((10, ("tab10",)), (20, ("tab20",)), (60, ("tab20", "tab20b", "tab20c")))
PANEL_COLUMNS = 5  # small multiples per row
ROW_INCHES = 0.27  # height of one model's row in a heat map: its 7.5-point name and cell text fit with room


def palette(n):
    """``n`` colours (RGBA), no two the same: tab10 for up to 10 models, tab20 for up to 20, tab20 +
    tab20b + tab20c for up to 60, then ``n`` evenly spaced hues."""
    for most, names in QUALITATIVE:
        if n <= most:
            return [to_rgba(c) for name in names for c in plt.get_cmap(name).colors][:n]
    return [to_rgba(c) for c in plt.get_cmap("hsv")(np.arange(n) / n)]


def _save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return fig


def _heat_rows(ax, matrix, archs, columns, cmap, norm):
    """One row per model, one column per point; a NaN cell (nothing measured) is drawn light grey."""
    cmap = plt.get_cmap(cmap).with_extremes(bad="0.88")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(archs)), archs, fontsize=7.5)
    ax.set_xticks(range(len(columns)), columns, fontsize=7.5)
    ax.set_xticks(np.arange(len(columns) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(archs) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    return image


def _seed_values(row, name):
    """Each seed's value of a figure of a row combined over seeds (posnet_fairseq.compare.seeds), in order."""
    return [v for k, v in row.items() if k.startswith(f"{name}_seed") and k[len(name) + 5:].isdigit()]


def bleu_vs_speed(table, length, base, path, seed_list=(None,)):
    """One point per model: BLEU (error bar: bootstrap 95% CI around the bootstrap mean; with several seeds
    the mean over the seeds, one standard deviation, and each seed's BLEU as a small mark) against
    sentences/s at forced output length ``length``; model i is numbered i beside its point and in the legend.
    ``seed_list``: the run's seeds (results.json's ``seeds``)."""
    seeded = several(seed_list)
    colours = palette(len(table))
    fig, ax = plt.subplots(figsize=(7.5, max(4.5, 0.19 * len(table) + 0.8)), layout="constrained")
    for i, row in enumerate(table):
        speed, bleu = row.get(DECODE_SPEED.key_of(length)), BLEU.key
        if row.get(bleu) is None or not isinstance(speed, float):
            continue
        centre, spread = (row[bleu], row[f"{bleu}_sd"]) if seeded else (row[f"{bleu}_mean"], row[f"{bleu}_ci"])
        ax.errorbar([speed], [centre], yerr=[[spread], [spread]], capsize=4,
                    linestyle="none", markersize=7, label=f"{i + 1}  {row['arch']}", color=colours[i],
                    marker=MARKERS[i % len(MARKERS)])
        if seeded:
            each = _seed_values(row, bleu)
            ax.scatter([speed] * len(each), each, s=12, marker="_", color=colours[i], linewidths=1.2)
        ax.annotate(str(i + 1), (speed, centre), xytext=(5, 3), textcoords="offset points", fontsize=7,
                    color="0.15")
    ax.set_xlabel(f"decoding speed, sentences/s (beam search, output forced to {length} tokens)")
    ax.set_ylabel("BLEU (test set), mean ± sd over the seeds (marks: each seed)" if seeded
                  else "BLEU (test set), 95% bootstrap CI")
    ax.set_title(f"Quality vs decoding speed (speed ratios against {base} in results.md)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
              ncol=1 if len(table) <= 30 else 2)
    return _save(fig, path)


def bleu_by_length(table, buckets, train_limit, unit, path, seed_list=(None,)):
    """Model x source-length bucket heat map: each cell holds the model's BLEU on the bucket, coloured by
    its difference from the baseline's (``table[0]``) on the same bucket; * marks a difference the paired
    bootstrap finds significant (``direction`` of the bucket's score). A cell not scored (too few
    sentences, or beyond the model's positions) is grey; the buckets beyond the training lengths are
    marked, and the buckets of joined test pairs (--concat-test) set apart."""
    archs = [row["arch"] for row in table]
    keys = [BUCKET_BLEU.key_of(bucket_name(b["lo"], b["hi"], b.get("concatenated"))) for b in buckets]
    scores = np.array([[row.get(k) if isinstance(row.get(k), float) else np.nan for k in keys] for row in table],
                      dtype=float).reshape(len(table), len(buckets))
    gap = scores - scores[:1]
    # The colours span 90% of the differences: one model far behind (NoPE) would leave the rest pale.
    # The cells beyond stay the darkest colour, and their text gives the score.
    reach = max(1.0, float(np.nanpercentile(np.abs(gap), 90))) if np.isfinite(gap).any() else 1.0
    fig, ax = plt.subplots(figsize=(2.8 + 0.95 * len(buckets), 1.6 + ROW_INCHES * len(table)), layout="constrained")
    columns = [f"{bucket_label(b['lo'], b['hi'], b.get('concatenated'))}\n({b['sentences']}"
               f"{', too few' if b.get('too_small') else ''})" for b in buckets]
    image = _heat_rows(ax, gap, archs, columns, "RdBu", TwoSlopeNorm(0.0, -reach, reach))
    for (r, c), value in np.ndenumerate(scores):
        if math.isnan(value):
            continue
        if several(seed_list):  # the spread, and significance is the verdict's (results.md)
            text = f"{value:.1f}±{table[r][keys[c] + '_sd']:.1f}"
        else:
            significant = (buckets[c]["scores"].get(archs[r]) or {}).get("direction") in ("better", "worse")
            text = f"{value:.1f}{'*' if significant else ''}"
        ax.text(c, r, text, ha="center", va="center", fontsize=7,
                color="white" if abs(gap[r, c]) > 0.6 * reach else "black")
    beyond = [c for c, b in enumerate(buckets) if b["lo"] > train_limit]
    if beyond:
        ax.axvline(beyond[0] - 0.5, color="0.2", linestyle="--", linewidth=1.4)
        ax.text(beyond[0] - 0.5, -0.6, f" beyond the training lengths (> {train_limit} {unit})", ha="left",
                va="bottom", fontsize=8)
    ax.set_xlabel(f"source length in {unit} (sentences in the bucket)" + plot_note(ax, buckets))
    ax.set_title(f"BLEU by source length; colour: difference from {archs[0]}\n("
                 + ("mean±sd over the seeds; which differences are real: the Verdict in results.md"
                    if several(seed_list)
                    else "* significant, paired bootstrap p <= 0.05") + "; grey: not scored)", fontsize=9, pad=16)
    fig.colorbar(image, ax=ax, shrink=min(1.0, 12 / len(table)), extend="both",
                 label=f"BLEU minus {archs[0]}'s on the bucket")
    return _save(fig, path)


def valid_loss(archs, curves, path, seed_curves=None):
    """Validation loss against updates, one panel per model (small multiples): the model in blue, the
    baseline ``archs[0]`` dashed black in every other panel; each panel names the last validation loss and the
    training wall time to it. ``seed_curves[arch][seed]``: the curves of the model's other seeds, thin light
    blue lines. The y axis stops at twice the worst last loss, so the ends of the curves can be told apart."""
    drawn = [a for a in archs if curves.get(a)]
    columns = min(PANEL_COLUMNS, max(len(drawn), 1))
    rows = max(1, math.ceil(len(drawn) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(2.5 * columns + 0.6, 1.75 * rows + 0.9), sharex=True,
                             sharey=True, squeeze=False, layout="constrained")
    base = curves.get(archs[0]) if archs else None
    lowest = min((p[2] for a in drawn for p in curves[a]), default=0.0)
    worst_last = max((curves[a][-1][2] for a in drawn), default=1.0)
    for ax, arch in zip(axes.flat, drawn):
        updates, seconds, loss = zip(*curves[arch])
        if base and arch != archs[0]:
            ax.plot([p[0] for p in base], [p[2] for p in base], color="black", linestyle="--", linewidth=1.0,
                    label=archs[0])
        for seed, curve in ((seed_curves or {}).get(arch) or {}).items():
            if curve:
                ax.plot([p[0] for p in curve], [p[2] for p in curve], color="tab:blue", alpha=0.45, linewidth=0.8,
                        label=f"{arch} seed {seed}")
        ax.plot(updates, loss, color="tab:blue", linewidth=1.6, label=arch)
        ax.set_title(arch, fontsize=7.5)
        ax.text(0.97, 0.93, f"{loss[-1]:.3f} after {seconds[-1] / 60:.1f} min", transform=ax.transAxes, ha="right",
                va="top", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for empty in range(len(drawn), rows * columns):  # only in the last row: columns <= len(drawn)
        axes.flat[empty].set_axis_off()
        axes.flat[empty - columns].tick_params(labelbottom=True)  # the panel above keeps its update ticks
    axes[0, 0].set_ylim(lowest - 0.05 * worst_last, 2 * worst_last)
    fig.supxlabel("updates", fontsize=9)
    fig.supylabel("validation loss (label-smoothed cross-entropy, base 2)", fontsize=9)
    fig.suptitle(f"Validation loss, one panel per model; dashed: {archs[0] if archs else ''}; the text: the last "
                 "validation loss and the training wall time to it", fontsize=9)
    return _save(fig, path)


def position_mixing(archs, profiles, path):
    """Mean self-attention weight by offset k = j - i (:mod:`posnet_fairseq.compare.mixing`), a model x
    offset heat map for the encoder (left) and the decoder (right); ``profiles[arch][site]`` = (offsets,
    weights) or None where the mixer exposes no weights (a grey row, named so)."""
    sites = (("encoder", "encoder self-attention"), ("decoder", "decoder self-attention (causal: k <= 0)"))
    offsets = {site: sorted({k for a in archs for k in (((profiles.get(a) or {}).get(site) or [[]])[0])})
               for site, _ in sites}
    fig, axes = plt.subplots(1, 2, figsize=(3.2 + 0.26 * sum(map(len, offsets.values())),
                                            1.8 + ROW_INCHES * len(archs)), sharey=True,
                             gridspec_kw={"width_ratios": [max(len(offsets[s]), 1) for s, _ in sites]},
                             layout="constrained")
    matrices = {}
    for site, _ in sites:
        matrix = np.full((len(archs), len(offsets[site])), np.nan)
        for r, arch in enumerate(archs):
            profile = (profiles.get(arch) or {}).get(site)
            for k, w in zip(*(profile or ((), ()))):
                matrix[r, offsets[site].index(k)] = w
        matrices[site] = matrix
    values = np.concatenate([m.ravel() for m in matrices.values()])
    top = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    # White: no weight; a mixer's negative weights (gLinearNet) are blue. Logarithmic above 0.01, so that the
    # broad profiles of content attention (0.02-0.1) stay apart beside the peaked Gaussians (0.3).
    norm = SymLogNorm(0.01, linscale=0.5, vmin=-top, vmax=top)
    for ax, (site, title) in zip(axes, sites):
        image = _heat_rows(ax, matrices[site], archs, [str(k) for k in offsets[site]], "RdBu_r", norm)
        for r in np.flatnonzero(np.isnan(matrices[site]).all(axis=1)):
            ax.text((len(offsets[site]) - 1) / 2, r, "no weights exposed", ha="center", va="center", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key offset k = j - i (positions)", fontsize=8)
    fig.colorbar(image, ax=list(axes), shrink=min(1.0, 12 / max(len(archs), 1)),
                 label="mean attention weight on the key at i + k")
    fig.suptitle("Learned position mixing: how much a word at position i takes from position i + k "
                 "(64 test sentences, mean over layers and heads)", fontsize=9)
    return _save(fig, path)


def replot(results, plot_dir, length_unit):
    """Every figure of a run from its saved ``results.json`` (a dict), into ``plot_dir``; returns the
    paths written. ``length_unit``: what source lengths count (words for the synthetic corpus, pieces
    for SentencePiece data)."""
    table = results["table"]
    scored = [row["arch"] for row in table if "failed" not in row]  # a FAILED row has no figures to draw
    trained = scored + [a for a in results["curves"] if a not in scored]
    os.makedirs(plot_dir, exist_ok=True)
    paths = {name: os.path.join(plot_dir, f"{name}.png")
             for name in ("bleu_vs_speed", "bleu_by_length", "valid_loss", "position_mixing")}
    seed_list = results.get("seeds", [None])
    bleu_vs_speed(table, results["decode_lengths"][0], scored[0], paths["bleu_vs_speed"], seed_list)
    bleu_by_length(table, results["buckets"], results["train_limit"], length_unit, paths["bleu_by_length"],
                   seed_list)
    valid_loss(trained, results["curves"], paths["valid_loss"], results.get("seed_curves"))
    position_mixing(scored, results["mixing"], paths["position_mixing"])
    return list(paths.values())


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m posnet_fairseq.compare.plots",
        description="Redraw the plots of a posnet-compare run from its results.json (nothing is trained or scored).")
    parser.add_argument("results", help="the run's results.json")
    parser.add_argument("--out", help="folder for the PNGs (default: plots/ beside results.json)")
    parser.add_argument("--length-unit", help="what source lengths count, e.g. words or pieces (default: "
                        "quality.json's length_unit beside results.json)")
    args = parser.parse_args(argv)
    try:
        with open(args.results, encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, ValueError) as err:
        parser.error(f"{args.results}: {err}")
    unit = args.length_unit
    quality_path = os.path.join(os.path.dirname(args.results), "quality.json")
    if unit is None and os.path.exists(quality_path):
        with open(quality_path, encoding="utf-8") as f:
            unit = json.load(f).get("length_unit")
    if unit is None:
        parser.error(f"--length-unit is needed: {quality_path} does not exist or names no length_unit")
    for path in replot(results, args.out or os.path.join(os.path.dirname(args.results), "plots"), unit):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
