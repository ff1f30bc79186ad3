"""Position analysis after Wennberg & Henter (2021, Section 3), i.e. how translation-invariant a model's position
handling is: Toeplitzness of position embeddings and TISA's learned scoring functions.

* Position embeddings E_P (N x D, one row per real position) define the
  position-position inner products P = E_P E_P^T. If the model only used
  relative positions, P would be a Toeplitz matrix (constant along every
  diagonal). :func:`toeplitz_r2` fits the best Toeplitz matrix (the mean of
  each diagonal) and reports the fraction of P's variance it explains, R^2.
  A sinusoidal table gives R^2 = 1 (sin a sin b + cos a cos b = cos(a - b)).
* :func:`kernel_profiles` evaluates every TISA head's f_h(k) from a
  checkpoint's parameters, :func:`plot_kernels` draws them like the paper's
  Figure 3, and :func:`plot_gram` draws P as a heat map.

Everything works on plain state dicts, so no model needs to be built.
"""
import re
from collections import OrderedDict
from typing import Dict, Optional

import torch
from torch import Tensor

from .mixers.tisa import TisaScorer

_TISA_PARAMS = ("offsets", "amplitudes", "sharpness")
_LAYER = re.compile(r"(?P<side>encoder|decoder)\.layers\.(?P<layer>\d+)\.(?P<module>\w+)\.")


def position_gram(table: Tensor) -> Tensor:
    """P = E_P E_P^T (float64) for an N x D table of position embeddings."""
    table = table.double()
    return table @ table.t()


def toeplitz_fit(matrix: Tensor) -> Tensor:
    """The least-squares Toeplitz approximation of a square matrix: each diagonal's mean."""
    n = matrix.size(0)
    rows = torch.arange(n).unsqueeze(1)
    offsets = torch.arange(n).unsqueeze(0) - rows + (n - 1)  # diagonal index 0..2n-2
    sums = torch.zeros(2 * n - 1, dtype=matrix.dtype).index_add_(0, offsets.flatten(), matrix.flatten())
    counts = torch.bincount(offsets.flatten(), minlength=2 * n - 1).to(matrix.dtype)
    return (sums / counts)[offsets]


def toeplitz_r2(matrix: Tensor) -> float:
    """Variance of ``matrix`` explained by its best Toeplitz fit (1.0: exactly Toeplitz)."""
    matrix = matrix.double()
    residual = (matrix - toeplitz_fit(matrix)).pow(2).sum()
    total = (matrix - matrix.mean()).pow(2).sum()
    return float(1.0 - residual / total)


def sinusoidal_table(num_positions: int, dim: int, padding_idx: int = 1) -> Tensor:
    """fairseq's sinusoidal embeddings of the real positions (padding_idx + 1 onwards)."""
    from fairseq.modules import SinusoidalPositionalEmbedding

    table = SinusoidalPositionalEmbedding.get_embedding(num_positions + padding_idx + 1, dim, padding_idx)
    return table[padding_idx + 1:]


def _arg(cfg, name, default=None):
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(name, default)
    return getattr(cfg, name, default)


def position_tables(model_state: Dict[str, Tensor], model_cfg, max_positions: Optional[int] = None):
    """{name: (kind, N x D table)} of the encoder's and decoder's position embeddings.

    Learned tables (``--encoder-learned-pos``/``--decoder-learned-pos``) come
    from the checkpoint, without their padding rows; sinusoidal ones are
    rebuilt from the configuration. None when the model has no position
    embeddings (``--no-token-positional-embeddings``).
    """
    tables = OrderedDict()
    if _arg(model_cfg, "no_token_positional_embeddings", False):
        return tables
    for side, source in (("encoder", "source"), ("decoder", "target")):
        limit = _arg(model_cfg, f"max_{source}_positions", 1024)
        weight = model_state.get(f"{side}.embed_positions.weight")
        if weight is not None:
            # fairseq's learned table has max_positions + padding_idx + 1 rows;
            # real positions start after the padding row.
            padding_idx = weight.size(0) - limit - 1
            kind, table = "learned", weight[padding_idx + 1:]
        else:
            dim = _arg(model_cfg, f"{side}_embed_dim")
            if dim is None:
                continue
            kind, table = "sinusoidal", sinusoidal_table(limit, dim)
        if max_positions is not None:
            table = table[:max_positions]
        tables[f"{side}.embed_positions"] = (kind, table.float())
    return tables


def tisa_parameters(model_state: Dict[str, Tensor]):
    """{module prefix: {"offsets", "amplitudes", "sharpness"}} of every TISA scorer, in model order."""
    found = OrderedDict()
    for name, value in model_state.items():
        prefix, _, leaf = name.rpartition(".")
        if leaf in _TISA_PARAMS:
            found.setdefault(prefix, {})[leaf] = value
    return OrderedDict((p, v) for p, v in found.items() if set(v) == set(_TISA_PARAMS))


def kernel_profiles(model_state: Dict[str, Tensor], max_distance: int = 20):
    """{scorer prefix: H x (2K+1) tensor of f_h(k) for k = -K..K} (fp32)."""
    distances = torch.arange(-max_distance, max_distance + 1)
    profiles = OrderedDict()
    for prefix, params in tisa_parameters(model_state).items():
        heads, kernels = params["offsets"].shape
        scorer = TisaScorer(heads, kernels)
        scorer.load_state_dict({k: v.float() for k, v in params.items()})
        with torch.no_grad():
            profiles[prefix] = scorer.profile(distances)
    return profiles


def visible_peaks(prefix: str, values: Tensor, max_distance: int) -> Tensor:
    """Per head, the distance k at which f_h peaks (decoder: among the visible k <= 0)."""
    if prefix.startswith("decoder."):
        values = values[:, : max_distance + 1]
    return values.argmax(dim=1) - max_distance


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_kernels(profiles, path: str, max_distance: int):
    """One panel per layer and side (rows: encoder, decoder; columns: layers),
    one curve per head: f_h(k) over k = j - i (key minus query position).
    In decoder panels the unused future half (k > 0) is shaded."""
    plt = _pyplot()
    grid = OrderedDict()
    for prefix, values in profiles.items():
        match = _LAYER.search(prefix + ".")
        side, layer = (match["side"], int(match["layer"])) if match else (prefix, 0)
        grid.setdefault(side, {})[layer] = values
    rows = list(grid)
    cols = max(len(layers) for layers in grid.values())
    fig, axes = plt.subplots(len(rows), cols, figsize=(2.8 * cols, 2.4 * len(rows)), squeeze=False,
                             sharex=True)
    distances = torch.arange(-max_distance, max_distance + 1).numpy()
    for r, side in enumerate(rows):
        for c in range(cols):
            ax = axes[r][c]
            if c not in grid[side]:
                ax.axis("off")
                continue
            if side == "decoder":
                # Causal self-attention never uses f(k) for k > 0 (future keys).
                ax.axvspan(0.5, max_distance, color="0.9", zorder=0)
            for h, curve in enumerate(grid[side][c]):
                ax.plot(distances, curve.numpy(), label=f"head {h}", linewidth=1.2)
            ax.axvline(0, color="0.7", linewidth=0.6)
            ax.axhline(0, color="0.7", linewidth=0.6)
            ax.set_title(f"{side} layer {c}", fontsize=9)
            ax.tick_params(labelsize=7)
            if r == len(rows) - 1:
                ax.set_xlabel("k = j - i", fontsize=8)
            if c == 0:
                ax.set_ylabel("f(k)", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="best")
    fig.suptitle("TISA positional scoring functions", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_gram(gram: Tensor, path: str, title: str):
    """P = E_P E_P^T as a heat map (row i, column j: positions)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    image = ax.imshow(gram.numpy(), cmap="RdBu_r", interpolation="nearest")
    limit = float(gram.abs().max())
    image.set_clim(-limit, limit)
    fig.colorbar(image, ax=ax)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("position j", fontsize=8)
    ax.set_ylabel("position i", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def analyse_checkpoint(path: str, out_dir: Optional[str], max_positions: int = 128, max_distance: int = 20):
    """``posnet-analyze``'s report on a checkpoint: (lines of text, {side: Toeplitz R^2 of its position table}).
    With ``out_dir`` the figures are written there: ``{side}_position_gram.png``, ``tisa_kernels.png``."""
    import os

    from fairseq import checkpoint_utils

    from .compat import allow_fairseq_checkpoint_classes

    allow_fairseq_checkpoint_classes()
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    model_cfg = state["cfg"]["model"] if state.get("cfg") is not None else state.get("args")
    model_state = state["model"]
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
    lines, r2s = [], {}
    tables = position_tables(model_state, model_cfg, max_positions)
    if not tables:
        lines.append("no position embeddings (--no-token-positional-embeddings)")
    for name, (kind, table) in tables.items():
        gram = position_gram(table)
        side = name.split(".")[0]
        r2s[side] = toeplitz_r2(gram)
        lines.append(f"{name} ({kind}, {table.size(0)} x {table.size(1)}): Toeplitz R^2 = {r2s[side]:.4f}")
        if out_dir is not None:
            figure = os.path.join(out_dir, f"{side}_position_gram.png")
            plot_gram(gram, figure, f"{name} ({kind})\nP = E E^T, Toeplitz R^2 = {r2s[side]:.3f}")
            lines.append(f"wrote {figure}")
    profiles = kernel_profiles(model_state, max_distance)
    if not profiles:
        lines.append("no TISA scorers in this checkpoint")
    for prefix, values in profiles.items():
        peaks = visible_peaks(prefix, values, max_distance)
        lines.append(f"{prefix}: {values.size(0)} heads, peak distance per head {peaks.tolist()}, "
                     f"range [{float(values.min()):.3f}, {float(values.max()):.3f}]")
    if profiles and out_dir is not None:
        figure = os.path.join(out_dir, "tisa_kernels.png")
        plot_kernels(profiles, figure, max_distance)
        lines.append(f"wrote {figure}")
    return lines, r2s
