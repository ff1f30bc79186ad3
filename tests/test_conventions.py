"""The convention flags reproduce the AppTek PosNet code (apptek/posnet-position_based_attention,
read for /work/shared/notes/anchors-impl.md section 1): each test writes the authors' formula out
itself, loop by loop in float64, and compares the mixer built with the flag against it.

* ``--gating-norm apptek`` / ``--posnet-position-norm apptek``: ``LayerNormalization``,
  ``(x - mean) / sqrt(unbiased var + 1e-8) * a + b``, on the gated values and the positions;
* ``--aposnet-sinusoids apptek``: ``SinusodialPositionalEmbedding``, ``pe[n, 2k] = sin(n w_k)``,
  ``pe[n, 2k+1] = cos(n w_k)``, ``w_k = 10000^(-2k/D)``;
* ``--arposnet-absolute-positions shared``: arPosNet's two terms read one learned,
  LayerNorm'd position vector (``PositionBasedAttention`` with ``posnet_type = 'arPosNet'``);
* ``--hc-weight-dropout``: ``GaussianMultiHeadAttentionLayer`` drops its pdf weights.

Every flag defaults to the behaviour before it existed; tests/test_mixer_contract.py runs
the flags' variants through the mixer contract as well.
"""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import SinusoidalPositionalEmbedding
from torch import nn

from fairseq_testing import TINY_DIMS, build_model
from posnet_fairseq.mixers import posnet
from posnet_fairseq.mixers.gating import GatedMixer
from posnet_fairseq.mixers.norms import AppTekLayerNorm
from posnet_fairseq.mixers.position_energies import sinusoids

D, H, K = 16, 2, 2
APPTEK_NORMS = ["--gating-norm", "apptek", "--posnet-position-norm", "apptek"]


# ----- the authors' formulas, written out -----

def apptek_layer_norm(x, a, b):
    """LayerNormalization: mean, then the variance divided by D - 1, eps 1e-8."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / (x.size(-1) - 1)
    return (x - mean) / torch.sqrt(var + 1e-8) * a + b


def apptek_sinusoids(length, dim):
    """SinusodialPositionalEmbedding: interleaved sin/cos of n * 10000^(-2k/D)."""
    table = torch.zeros(length, dim, dtype=torch.float64)
    for n in range(length):
        for k in range(dim // 2):
            angle = n / 10000 ** (2 * k / dim)
            table[n, 2 * k], table[n, 2 * k + 1] = math.sin(angle), math.cos(angle)
    return table


def linear(module, x):
    out = x @ module.weight.detach().double().T
    return out if module.bias is None else out + module.bias.detach().double()


def apptek_position_attention(x, p, w, kinds, causal, gated):
    """PositionBasedAttention.__call__ (eval mode) for one sentence: x (T x D) tokens, p (T x D)
    position vectors; ``w`` holds the modules; ``kinds`` has "a" and/or "r"."""
    T = x.size(0)
    dh = D // H
    v = linear(w["W_v"], x)
    if gated:
        v = apptek_layer_norm(F.gelu(v), w["lnorm_v"].weight.detach().double(), w["lnorm_v"].bias.detach().double())
        g = F.gelu(linear(w["W_g"], x))
    e = torch.zeros(H, T, T, dtype=torch.float64)
    q_r = linear(w["W_q2"], p) if "r" in kinds else None
    q_a, k_a = (linear(w["W_q1"], p), linear(w["W_k"], p)) if "a" in kinds else (None, None)
    for h in range(H):
        s = slice(h * dh, (h + 1) * dh)
        for n in range(T):
            for m in range(T):
                if "r" in kinds:
                    slot = min(max(m - n, -K), K) + K
                    e[h, n, m] += q_r[n, s] @ w["rel_embed"].detach().double()[slot, s]
                if "a" in kinds:
                    e[h, n, m] += q_a[n, s] @ k_a[m, s]
    e = e / math.sqrt(dh)
    if causal:
        e = e.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    a = torch.softmax(e, dim=-1)
    o = torch.cat([a[h] @ v[:, h * dh:(h + 1) * dh] for h in range(H)], dim=-1)
    if gated:
        o = o * g
    return linear(w["W_o"], o)


# ----- the mixers under test -----

def position_mixer(site, mixer, flags, seed=1):
    """(mixer as the layer calls it, the PositionAttention inside, modules by the AppTek code's names)."""
    side = "encoder" if site == "encoder_self" else "decoder"
    model, _ = build_model([f"--{side}-self-mixer", mixer, f"--{side}-learned-pos", "--posnet-max-relative", str(K),
                            *flags], seed=seed)
    layers = model.encoder.layers if side == "encoder" else model.decoder.layers
    outer = layers[0].self_attn
    inner = outer.mixer if isinstance(outer, GatedMixer) else outer
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # LayerNorm parameters away from 1 and 0, so that they count
        for norm in (inner.relative and inner.relative.positions.norm, getattr(inner.v_proj, "norm", None)):
            if isinstance(norm, nn.LayerNorm):
                norm.weight.copy_(1 + 0.5 * torch.randn(D, generator=g))
                norm.bias.copy_(0.5 * torch.randn(D, generator=g))
    relative, absolute = inner.relative, inner.absolute
    w = {"W_q2": relative and relative.q_proj, "rel_embed": relative and relative.keys,
         "W_q1": absolute and absolute.q_proj, "W_k": absolute and absolute.k_proj}
    if isinstance(outer, GatedMixer):
        # Self-attention: W_v and W_g are one Linear layer, rows [:D] and [D:].
        fused = outer.value_gate_proj
        W_v = argparse.Namespace(weight=fused.weight[:D], bias=fused.bias[:D]) if fused is not None else inner.v_proj.proj
        W_g = argparse.Namespace(weight=fused.weight[D:], bias=fused.bias[D:]) if fused is not None else outer.gate_proj
        w.update(W_v=W_v, lnorm_v=inner.v_proj.norm, W_g=W_g, W_o=outer.out_proj)
    else:
        w.update(W_v=inner.v_proj, W_o=inner.out_proj)
    return outer, inner, w


def learned_positions(inner, length):
    """The rPosNet position vectors of the AppTek code: its learned table, through LayerNormalization."""
    table, norm = inner.relative.positions.embedding, inner.relative.positions.norm
    rows = table.weight.detach().double()[table.padding_idx + 1: table.padding_idx + 1 + length]
    return apptek_layer_norm(rows, norm.weight.detach().double(), norm.bias.detach().double())


def batch(site, seed=0):
    """x (T x B x D) and its padding mask: left-padded sources, right-padded targets; real lengths."""
    lengths = [7, 4]
    T = max(lengths)
    x = torch.randn(T, len(lengths), D, generator=torch.Generator().manual_seed(seed))
    pad = torch.zeros(len(lengths), T, dtype=torch.bool)
    spans = []
    for b, n in enumerate(lengths):
        span = slice(T - n, T) if site == "encoder_self" else slice(0, n)
        pad[b] = True
        pad[b, span] = False
        spans.append(span)
    return x, pad, spans


def compare(site, mixer, flags, kinds, gated, positions):
    outer, inner, w = position_mixer(site, mixer, flags)
    x, pad, spans = batch(site)
    with torch.no_grad():
        out = outer(x, x, x, key_padding_mask=pad)[0].double()
    worst = 0.0
    for b, span in enumerate(spans):
        tokens = x[span, b].double()
        expected = apptek_position_attention(tokens, positions(inner, tokens.size(0)), w, kinds,
                                             site == "decoder_self", gated)
        worst = max(worst, (out[span, b] - expected).abs().max().item())
    return worst


SITES = ["encoder_self", "decoder_self"]


# ----- (a) the AppTek LayerNorm -----

def test_apptek_layer_norm_is_the_authors_formula():
    g = torch.Generator().manual_seed(0)
    norm = AppTekLayerNorm(D)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(D, generator=g))
        norm.bias.copy_(torch.randn(D, generator=g))
    x = 3 * torch.randn(5, 3, D, generator=g) + 1
    expected = apptek_layer_norm(x.double(), norm.weight.double(), norm.bias.double())
    torch.testing.assert_close(norm(x).double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(norm(x.half()).double(), expected, atol=1e-2, rtol=1e-2)  # computed in fp32
    torch_norm = nn.LayerNorm(D)
    torch_norm.load_state_dict(norm.state_dict())  # same parameters and state-dict keys
    assert (torch_norm(x).double() - expected).abs().max() > 1e-2  # D/(D-1) in the variance


@pytest.mark.parametrize("site", SITES)
def test_rposnet_with_gating_reproduces_the_authors_code(site):
    """rPosNet + GeLU gating as the shipped AppTek configs run it: equal with both AppTek norms,
    different (by far more than rounding) with torch's LayerNorm, today's default."""
    learned = learned_positions
    assert compare(site, "rposnet", [f"--{site.replace('_', '-')}-gating", "on", *APPTEK_NORMS], "r", True,
                   learned) < 1e-5
    assert compare(site, "rposnet", [f"--{site.replace('_', '-')}-gating", "on"], "r", True, learned) > 1e-3


def test_norm_flags_default_to_torch_and_choose_the_apptek_norm():
    def norms(flags):
        outer, inner, _ = position_mixer("encoder_self", "rposnet", ["--encoder-self-gating", "on",
                                                                      "--gating-gate-norm", *flags])
        return [type(m) for m in (inner.relative.positions.norm, inner.v_proj.norm, outer.gate_norm)]

    assert norms([]) == [nn.LayerNorm] * 3
    assert norms(APPTEK_NORMS) == [AppTekLayerNorm] * 3
    assert norms(["--gating-norm", "apptek"]) == [nn.LayerNorm, AppTekLayerNorm, AppTekLayerNorm]


def test_bad_norm_value_names_the_flag(capsys):
    with pytest.raises(SystemExit):  # argparse refuses it, listing the choices
        build_model(["--gating-norm", "rms"])
    assert "--gating-norm: invalid choice: 'rms'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--posnet-position-norm rms: choose from torch, apptek"):
        posnet.FLAGS.options(argparse.Namespace(posnet_position_norm="rms"))  # e.g. from an edited checkpoint


# ----- (b) the aPosNet sinusoids -----

@pytest.mark.parametrize("dim", [16, 512])
def test_apptek_sinusoids_are_the_authors_table(dim):
    torch.testing.assert_close(sinusoids(130, dim, "apptek").double(), apptek_sinusoids(130, dim),
                               atol=2e-5, rtol=0)
    # fairseq's layout stays the default and stays fairseq's.
    torch.testing.assert_close(sinusoids(130, dim), SinusoidalPositionalEmbedding.get_embedding(130, dim))
    assert (sinusoids(130, dim, "apptek") - sinusoids(130, dim)).abs().max() > 0.5


@pytest.mark.parametrize("site", SITES)
def test_aposnet_with_apptek_sinusoids_reproduces_the_authors_code(site):
    def positions(inner, length):
        return apptek_sinusoids(length, D)

    assert compare(site, "aposnet", ["--aposnet-sinusoids", "apptek"], "a", False, positions) < 1e-5
    assert compare(site, "aposnet", [], "a", False, positions) > 1e-3


# ----- (c) arPosNet with one learned, normalised position vector -----

@pytest.mark.parametrize("site", SITES)
def test_arposnet_with_shared_positions_reproduces_the_authors_code(site):
    """The AppTek arPosNet: both energies from the LayerNorm'd learned positions, GeLU gating."""
    flags = [f"--{site.replace('_', '-')}-gating", "on", *APPTEK_NORMS, "--arposnet-absolute-positions", "shared"]
    assert compare(site, "arposnet", flags, "ar", True, learned_positions) < 1e-5
    assert compare(site, "arposnet", flags[:-2], "ar", True, learned_positions) > 1e-3  # today's sinusoids


def test_arposnet_shared_positions_decode_and_fold():
    """Step-by-step decoding equals teacher forcing, and make_generation_fast_'s folded
    tables (capped at the learned positions) give the same outputs."""
    outer, inner, _ = position_mixer("decoder_self", "arposnet", ["--arposnet-absolute-positions", "shared"])
    assert inner.absolute.shared is inner.relative.positions
    x = torch.randn(12, 2, D, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = outer(x, x, x)[0]
        state = {}
        steps = [outer(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0] for t in range(12)]
        torch.testing.assert_close(torch.cat(steps), full, atol=1e-5, rtol=0)
        inner.make_generation_fast_()
        assert inner.absolute.table is not None and inner.absolute.table.size(1) <= inner.max_positions()
        torch.testing.assert_close(outer(x, x, x)[0], full, atol=1e-5, rtol=0)


def test_arposnet_shared_positions_refused_in_cross_attention():
    with pytest.raises(ValueError, match="--arposnet-absolute-positions shared: arposnet cross-attention"):
        build_model(["--cross-mixer", "arposnet", "--length-ratio", "1.0", "--decoder-learned-pos",
                     "--arposnet-absolute-positions", "shared"])


def test_position_flags_default_to_todays_behaviour():
    _, inner, _ = position_mixer("encoder_self", "arposnet", [])
    assert inner.absolute.sinusoid_layout == "fairseq" and inner.absolute.shared is None


# ----- (d) dropout on the hard-coded Gaussian weights -----

OFFSETS = (-1, 0, 1)  # the AppTek GaussianNet encoder's


def gaussiannet(p):
    model, _ = build_model(["--encoder-self-mixer", "hc_gaussian", "--encoder-attention-heads", "4",
                            "--hc-encoder-offsets=-1,0,1", "--hc-bias", "--hc-weight-dropout", str(p)])
    return model.encoder.layers[0].self_attn


def apptek_gaussian_attention(mixer, x, pad, keep=None):
    """GaussianMultiHeadAttentionLayer: W[h, n, m] = pdf(m - (n + o_h)), o_h = offsets[h % 3],
    pads masked to 0, then the dropout mask ``keep`` (already scaled by 1 / (1 - p))."""
    T, B, _ = x.shape
    heads, dh = 4, D // 4
    weights = torch.zeros(heads, T, T, dtype=torch.float64)
    for h in range(heads):
        for n in range(T):
            for m in range(T):
                z = m - (n + OFFSETS[h % 3])
                weights[h, n, m] = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    a = weights.unsqueeze(0).repeat(B, 1, 1, 1).masked_fill(pad[:, None, None, :], 0.0)
    if keep is not None:
        a = a * keep.double()
    v = linear(mixer.v_proj, x.double().transpose(0, 1))  # B x T x D
    o = torch.cat([a[:, h] @ v[..., h * dh:(h + 1) * dh] for h in range(heads)], dim=-1)
    return linear(mixer.out_proj, o).transpose(0, 1)


def test_gaussiannet_weight_dropout_reproduces_the_authors_code():
    p = 0.3
    mixer = gaussiannet(p).train()
    x, pad, _ = batch("encoder_self", seed=5)
    B, T = pad.shape
    torch.manual_seed(11)
    with torch.no_grad():
        out = mixer(x, x, x, key_padding_mask=pad)[0]
    torch.manual_seed(11)  # the same draws: one mask per sentence, head, query and key
    keep = F.dropout(torch.ones(B, 4, T, T), p, training=True)
    assert 0.5 < (keep == 0).float().mean() / p < 1.5
    torch.testing.assert_close(out.double(), apptek_gaussian_attention(mixer, x, pad, keep), atol=1e-5, rtol=0)
    # Sentences get different masks (the pattern is shared, its dropout is not).
    assert not torch.equal(keep[0], keep[1])
    with torch.no_grad():  # evaluation: no dropout
        torch.testing.assert_close(mixer.eval()(x, x, x, key_padding_mask=pad)[0].double(),
                                   apptek_gaussian_attention(mixer, x, pad), atol=1e-5, rtol=0)


def test_weight_dropout_is_off_by_default():
    mixer = gaussiannet(0.0).train()
    x, pad, _ = batch("encoder_self", seed=5)
    before = torch.get_rng_state()
    with torch.no_grad():
        out = mixer(x, x, x, key_padding_mask=pad)[0]
    assert torch.equal(torch.get_rng_state(), before)  # nothing was drawn
    torch.testing.assert_close(out.double(), apptek_gaussian_attention(mixer, x, pad), atol=1e-5, rtol=0)


@pytest.mark.parametrize("p", ["1.0", "-0.1"])
def test_weight_dropout_out_of_range_names_the_flag(p):
    with pytest.raises(ValueError, match=r"--hc-weight-dropout .*: a dropout probability in \[0, 1\)"):
        build_model(["--encoder-self-mixer", "hc_gaussian", f"--hc-weight-dropout={p}"])


def test_tiny_dims_are_the_ones_assumed():
    assert TINY_DIMS[TINY_DIMS.index("--encoder-embed-dim") + 1] == str(D)
    assert TINY_DIMS[TINY_DIMS.index("--encoder-attention-heads") + 1] == str(H)
