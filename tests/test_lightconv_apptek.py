"""AppTek's light convolution (lightconv_apptek): the formula vs a naive loop,
border renormalisation, parameters, the presets of the PosNet paper's Table 5."""
import pytest
import torch
import fairseq_testing
from fairseq_testing import build_model

from posnet_fairseq.mixers.gating import GatedMixer, ValueActivation
from posnet_fairseq.mixers.lightconv_apptek import AppTekLightConv

D, H = 12, 3


def make(max_relative, global_context, causal, seed=0):
    torch.manual_seed(seed)
    m = AppTekLightConv(D, H, max_relative, global_context, dropout=0.0, causal=causal).double().eval()
    # Xavier weights are small: make them large enough that a wrong slot shows.
    with torch.no_grad():
        m.weight.normal_(0.0, 2.0)
    return m


def padded_batch(lengths, left, seed=1):
    return fairseq_testing.padded_batch(lengths, left, D, seed)


def naive(m, x, pad):
    """The energies, window, softmax and sum one pair at a time over the real tokens."""
    T, B, _ = x.shape
    dh, K = m.head_dim, m.max_relative
    v = m.v_proj(x)
    z = torch.zeros(T, B, D, dtype=x.dtype)
    for b in range(B):
        real = [t for t in range(T) if not pad[b, t]]
        for h in range(H):
            hs = slice(h * dh, (h + 1) * dh)
            for n, tn in enumerate(real):
                keys = [(mm, tm) for mm, tm in enumerate(real)
                        if not (m.causal and mm > n) and (m.global_context or abs(mm - n) <= K)]
                e = torch.stack([m.weight[h, min(max(mm - n, -K), K) + K] for mm, _ in keys])
                a = torch.softmax(e, dim=0)
                z[tn, b, hs] = sum(a_j * v[tm, b, hs] for a_j, (_, tm) in zip(a, keys))
    return m.out_proj(z)


@pytest.mark.parametrize("global_context", [False, True])
@pytest.mark.parametrize("max_relative", [1, 20])  # shorter and longer than the sentences
@pytest.mark.parametrize("causal,left", [(False, True), (True, False), (True, True)])
def test_matches_naive_loop(global_context, max_relative, causal, left):
    m = make(max_relative, global_context, causal)
    x, pad = padded_batch([7, 4, 1], left)
    out, _ = m(x, x, x, key_padding_mask=pad)
    expected = naive(m, x, pad)
    real = ~pad.t()
    assert torch.allclose(out[real], expected[real], atol=1e-10)


def test_window_renormalised_and_global_context_sees_everything():
    x, pad = padded_batch([6], left=True)
    local = make(1, False, False)
    _, w = local(x, x, x, key_padding_mask=pad, need_head_weights=True)  # H x B x T x S
    # Query 0 sees keys 0 and 1 only, and they carry all its mass.
    assert torch.all(w[:, 0, 0, 2:] == 0)
    assert torch.allclose(w[:, 0, 0, :2].sum(-1), torch.ones(H, dtype=torch.double))
    glob = make(1, True, False)
    _, w = glob(x, x, x, key_padding_mask=pad, need_head_weights=True)
    assert torch.all(w[:, 0, 0, :] > 0)
    # Distances beyond K share the border weight W[h, 2K] = W[h, 2].
    assert torch.allclose(w[:, 0, 0, 2], w[:, 0, 0, 5])


def test_parameters_replace_query_and_key_projections():
    """Per self-attention layer: W_q and W_k (2 (D^2 + D)) go, H x (2K+1) comes."""
    dims, heads, layers, k = 16, 2, 2, 16
    mha, _ = build_model()
    conv, _ = build_model(arch="lightconv_apptek_transformer_tiny")
    count = lambda model: sum(p.numel() for p in model.parameters())
    per_layer = heads * (2 * k + 1) - 2 * (dims * dims + dims)
    assert count(conv) - count(mha) == 2 * layers * per_layer
    w = conv.encoder.layers[0].self_attn.weight
    assert w.shape == (heads, 2 * k + 1)
    # Xavier-uniform U(-bound, bound): 66 draws all below 0.8 bound would have probability 0.8^66 < 1e-6.
    bound = (6 / (heads + 2 * k + 1)) ** 0.5
    assert 0.8 * bound < w.abs().max() <= bound


def test_presets():
    plain, _ = build_model(arch="lightconv_apptek_transformer_tiny")
    gated, _ = build_model(arch="lightconv_apptek_gated_transformer_tiny")
    glob, _ = build_model(arch="lightconv_apptek_global_transformer_tiny")
    for model, is_gated, is_global in ((plain, False, False), (gated, True, False), (glob, True, True)):
        for layers in (model.encoder.layers, model.decoder.layers):
            mixer = layers[0].self_attn
            assert isinstance(mixer, GatedMixer) == is_gated
            inner = mixer.mixer if is_gated else mixer
            assert isinstance(inner, AppTekLightConv)
            assert isinstance(inner.v_proj, ValueActivation) == is_gated  # fused with the gate: W_v outside
            assert inner.global_context == is_global and inner.max_relative == 16
        assert not isinstance(model.decoder.layers[0].encoder_attn, (GatedMixer, AppTekLightConv))
    assert build_model(arch="lightconv_apptek_transformer_tiny")[0].decoder.layers[1].self_attn.causal


def test_gating_flags_on_the_plain_preset_equal_the_gated_preset():
    """Table 5's recipe gates the plain preset with flags: the same model as the gated preset."""
    flagged, _ = build_model(["--encoder-self-gating", "on", "--decoder-self-gating", "on"],
                             arch="lightconv_apptek_transformer_tiny")
    gated, _ = build_model(arch="lightconv_apptek_gated_transformer_tiny")
    a, b = flagged.state_dict(), gated.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_bad_window_fails_at_build():
    with pytest.raises(ValueError, match="--lightconv-max-relative -1"):
        build_model(["--lightconv-max-relative", "-1"], arch="lightconv_apptek_transformer_tiny")
