"""LinearNet and gLinearNet (mixers/linearnet.py, PosNet paper baselines) beyond the mixer contract:
the formula written as a loop, parameter counts at base size (paper Table 2), and build-time checks."""

import pytest
import torch

from fairseq_testing import build_model, padded_batch, step_mixer
from posnet_fairseq.mixers.linearnet import LinearNetAttention

D, H = 8, 2


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_linearnet_equals_loop(causal):
    g = torch.Generator().manual_seed(0)
    mixer = LinearNetAttention(D, H, max_length=12, dropout=0.0, causal=causal).double().eval()
    with torch.no_grad():
        mixer.weight.normal_(generator=g)  # far from the small init, so every entry matters
    lengths = [7, 3, 5]
    x, mask = padded_batch(lengths, left=not causal, dim=D)  # decoder inputs are right-padded, sources left
    with torch.no_grad():
        out = mixer(x, x, x, key_padding_mask=mask)[0]
        v = mixer.v_proj(x)
        for b, n_tokens in enumerate(lengths):
            cols = [t for t in range(x.size(0)) if not mask[b, t]]  # column of position 0, 1, ...
            for n, col_n in enumerate(cols):
                heads = []
                for h in range(H):
                    acc = torch.zeros(D // H, dtype=torch.float64)
                    for m, col_m in enumerate(cols):
                        if causal and m > n:
                            continue
                        acc += mixer.weight[h, n, m] * v[col_m, b, h * (D // H): (h + 1) * (D // H)]
                    heads.append(acc)
                expected = mixer.out_proj(torch.cat(heads))
                torch.testing.assert_close(out[col_n, b], expected, rtol=1e-10, atol=1e-10)


def _params(arch):
    model, _ = build_model(arch=arch, dims=())
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_at_base():
    """Table 2 arithmetic: -W_Q,W_K per self-attention layer, + H x N x N per LinearNet layer,
    + W_G and the LayerNorm on v' per gated layer."""
    d, layers, heads, n = 512, 6, 8, 128
    linear = d * d + d
    transformer = _params("posnet_transformer_base")
    linearnet = _params("linearnet_transformer_base")
    assert linearnet - transformer == 2 * layers * (heads * n * n - 2 * linear)  # +1.57M - 6.30M
    assert _params("glinearnet_transformer_base") - linearnet == 2 * layers * (linear + 2 * d)  # +3.16M


def test_linearnet_presets_cover_128_positions():
    model, _ = build_model(arch="linearnet_transformer_tiny", dims=())
    assert model.max_positions() == (128, 128)
    assert {m.max_length for m in model.modules() if isinstance(m, LinearNetAttention)} == {128}


def test_glinearnet_gates_both_self_sites():
    model, _ = build_model(arch="glinearnet_transformer_tiny")
    for layer in list(model.encoder.layers) + list(model.decoder.layers):
        assert type(layer.self_attn).__name__ == "GatedMixer"
        assert isinstance(layer.self_attn.mixer, LinearNetAttention)
    assert type(model.decoder.layers[0].encoder_attn).__name__ == "MultiheadAttention"


def test_linearnet_refuses_longer_inputs():
    with pytest.raises(ValueError, match="--max-source-positions 1024 exceeds the 16 positions"):
        build_model(["--encoder-self-mixer", "linearnet", "--linearnet-max-length", "16"])
    with pytest.raises(ValueError, match="--max-target-positions 1024 exceeds the 16 positions"):
        build_model(["--decoder-self-mixer", "linearnet", "--linearnet-max-length", "16",
                     "--max-source-positions", "16"])
    mixer = LinearNetAttention(D, H, max_length=16, dropout=0.0, causal=False)
    x = torch.randn(17, 1, D)
    with pytest.raises(ValueError, match="17 positions exceeds its table of 16 .--linearnet-max-length"):
        mixer(x, x, x)
    causal = LinearNetAttention(D, H, max_length=2, dropout=0.0, causal=True)
    _, state = step_mixer(causal, x[:2])
    with pytest.raises(ValueError, match="3 positions exceeds its table of 2"):
        causal(x[:1], x[:1], x[:1], incremental_state=state)
