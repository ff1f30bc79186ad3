"""The PNG figures of a ``posnet-compare`` run (matplotlib, Agg backend).

Each function draws one figure from the run's figures, saves it and returns
the matplotlib Figure (the tests read the plotted data back from it). Every
model keeps one colour and marker in all figures.
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = "osD^vP*Xh<>p"


def style(index):
    return {"color": plt.get_cmap("tab10")(index % 10), "marker": MARKERS[index % len(MARKERS)]}


def _legend(ax):
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)


def _save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return fig


def bleu_vs_speed(table, length, base, path):
    """One point per model: BLEU (error bar: bootstrap 95% CI around the bootstrap mean) against
    sentences/s at forced output length ``length``."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, row in enumerate(table):
        speed = row.get(f"decode_{length}_sentences_per_s")
        if row.get("bleu") is None or not isinstance(speed, float):
            continue
        ax.errorbar([speed], [row["bleu_mean"]], yerr=[[row["bleu_ci"]], [row["bleu_ci"]]], capsize=4,
                    linestyle="none", markersize=7, label=row["arch"], **style(i))
    ax.set_xlabel(f"decoding speed, sentences/s (beam search, output forced to {length} tokens)")
    ax.set_ylabel("BLEU (test set), 95% bootstrap CI")
    ax.set_title(f"Quality vs decoding speed (speed ratios against {base} in results.md)", fontsize=10)
    ax.grid(alpha=0.3)
    _legend(ax)
    return _save(fig, path)


def bleu_by_length(table, buckets, train_limit, unit, path):
    """One line per model: BLEU per source-length bucket; the end of the training lengths marked; a bucket
    with too few sentences to score is left out of the lines and marked so under its tick."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    centres = [(b["lo"] + b["hi"]) / 2 for b in buckets]
    for i, row in enumerate(table):
        points = [(x, row.get(f"bleu_len_{b['lo']}_{b['hi']}"), row.get(f"bleu_len_{b['lo']}_{b['hi']}_ci"))
                  for x, b in zip(centres, buckets)]
        points = [p for p in points if isinstance(p[1], float)]
        if not points:
            continue
        xs, ys, cis = zip(*points)
        ax.errorbar(xs, ys, yerr=[c or 0.0 for c in cis], capsize=3, linewidth=1.4, markersize=6,
                    label=row["arch"], **style(i))
    boundary = train_limit + 0.5
    ax.axvline(boundary, color="0.3", linestyle="--", linewidth=1.2)
    ax.axvspan(boundary, buckets[-1]["hi"] + 1, color="0.92", zorder=0)
    ax.text(boundary, 1.0, f" beyond the training lengths (> {train_limit} {unit})", transform=ax.get_xaxis_transform(),
            va="bottom", ha="left", fontsize=8)
    ax.set_xticks(centres, [f"{b['lo']}-{b['hi']}\n({b['sentences']}{', too few' if b.get('too_small') else ''})"
                            for b in buckets], fontsize=8)
    ax.set_xlim(buckets[0]["lo"] - 1, buckets[-1]["hi"] + 1)
    ax.set_xlabel(f"source length in {unit} (sentences in the bucket)")
    ax.set_ylabel("BLEU on the bucket, 95% bootstrap CI")
    ax.grid(alpha=0.3)
    _legend(ax)
    return _save(fig, path)


def valid_loss(archs, curves, path):
    """Validation loss against updates (left) and training wall time (right), one line per model."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for i, arch in enumerate(archs):
        points = curves.get(arch) or []
        if not points:
            continue
        updates, seconds, loss = zip(*points)
        kw = dict(label=arch, linewidth=1.3, markersize=4, **style(i))
        left.plot(updates, loss, **kw)
        right.plot([s / 60 for s in seconds], loss, **kw)
    left.set_xlabel("updates")
    right.set_xlabel("training wall time, minutes (models trained side by side on a shared machine)")
    left.set_ylabel("validation loss (label-smoothed cross-entropy, base 2)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    _legend(right)
    return _save(fig, path)


def position_mixing(archs, profiles, path):
    """Mean self-attention weight by offset k = j - i, one line per model, encoder (left) and
    decoder (right) (:mod:`posnet_fairseq.compare.mixing`); ``profiles[arch][site]`` = (offsets,
    weights) or None where the mixer exposes no weights (named under the panel)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (site, title) in zip(axes, (("encoder", "encoder self-attention"),
                                        ("decoder", "decoder self-attention (causal: k <= 0)"))):
        missing = []
        for i, arch in enumerate(archs):
            profile = profiles.get(arch, {}).get(site)
            if profile is None:
                missing.append(arch)
                continue
            offsets, weights = profile
            ax.plot(offsets, weights, label=arch, linewidth=1.3, markersize=4, **style(i))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key offset k = j - i (positions)")
        ax.grid(alpha=0.3)
        if missing:
            ax.text(0.02, 0.98, "no weights exposed: " + ", ".join(missing), transform=ax.transAxes,
                    va="top", fontsize=7)
    axes[0].set_ylabel("mean attention weight on the key at i + k")
    _legend(axes[1])
    fig.suptitle("Learned position mixing: how much a word at position i takes from position i + k "
                 "(64 test sentences, mean over layers and heads)", fontsize=10)
    return _save(fig, path)
