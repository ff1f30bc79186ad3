"""xPos (mixers/xpos.py) against Sun et al. (2022), section 3, re-derived here with dense matrices."""
import math

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model
from posnet_fairseq.mixers.rope import RopeAttention
from posnet_fairseq.mixers.xpos import XPos, XPosAttention


def rotation_matrix(m, d, base=10000.0):
    """RoPE's R^d_{Theta,m} (RoFormer Eq. 15), dense float64: pairs (2i, 2i+1) turn by m base^(-2i/d)."""
    r = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        angle = m * base ** (-2 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        r[2 * i, 2 * i], r[2 * i, 2 * i + 1], r[2 * i + 1, 2 * i], r[2 * i + 1, 2 * i + 1] = c, -s, s, c
    return r


def decay_matrix(n, d, gamma, scale_base):
    """diag(zeta_i^(n / B)) over both dimensions of pair i, zeta_i = (i / (d/2) + gamma) / (1 + gamma)."""
    zeta = [(i / (d / 2) + gamma) / (1 + gamma) for i in range(d // 2)]
    return torch.diag(torch.tensor([z ** (n / scale_base) for z in zeta for _ in range(2)], dtype=torch.float64))


@pytest.mark.parametrize("d,gamma,scale_base", [(8, 0.4, 512.0), (16, 0.4, 8.0), (8, 1.0, 3.0)])
def test_queries_and_keys_are_scaled_inversely(d, gamma, scale_base):
    torch.manual_seed(0)
    xpos = XPos(d, gamma=gamma, scale_base=scale_base)
    positions = torch.tensor([[0, 1, 3, 9, 20, 40]])
    x = torch.randn(1, 2, positions.size(1), d)
    rotation = xpos.rotation(positions, x.device)
    q, k = xpos.rotate(x, rotation), xpos.rotate_key(x, rotation)
    worst = 0.0
    for t, n in enumerate(positions[0].tolist()):
        turned = torch.einsum("ij,hj->hi", rotation_matrix(n, d), x[0, :, t].double())
        expected_q = torch.einsum("ij,hj->hi", decay_matrix(n, d, gamma, scale_base), turned)
        expected_k = torch.einsum("ij,hj->hi", decay_matrix(-n, d, gamma, scale_base), turned)
        worst = max(worst, ((q[0, :, t].double() - expected_q).abs() / expected_q.abs().clamp(min=1)).max().item(),
                    ((k[0, :, t].double() - expected_k).abs() / expected_k.abs().clamp(min=1)).max().item())
    assert worst <= 1e-5, worst


def test_logits_depend_on_the_distance_and_decay_with_it():
    """q_n^T k_m = q^T R_{m-n} diag(zeta^((n-m)/B)) k: a shift of both positions changes nothing."""
    torch.manual_seed(1)
    d, scale_base = 8, 4.0
    xpos = XPos(d, scale_base=scale_base)
    q, k = torch.randn(1, 1, 1, d), torch.randn(1, 1, 1, d)

    def logit(n, m):
        rq = xpos.rotate(q, xpos.rotation(torch.tensor([[n]]), q.device))[0, 0, 0].double()
        rk = xpos.rotate_key(k, xpos.rotation(torch.tensor([[m]]), k.device))[0, 0, 0].double()
        return (rq @ rk).item()

    for n, m in ((3, 0), (10, 2), (40, 40)):
        expected = (q[0, 0, 0].double() @ rotation_matrix(m - n, d) @ decay_matrix(n - m, d, 0.4, scale_base)
                    @ k[0, 0, 0].double()).item()
        assert logit(n, m) == pytest.approx(expected, abs=1e-4)
        assert logit(n + 17, m + 17) == pytest.approx(expected, abs=1e-4)
    zeta = xpos.decay(torch.device("cpu"))
    assert zeta[0].item() == pytest.approx(0.4 / 1.4) and zeta[-1].item() < 1


def test_with_no_decay_it_is_rope():
    """gamma -> infinity makes every zeta_i 1: the transform is RoPE's rotation."""
    torch.manual_seed(2)
    x, positions = torch.randn(1, 2, 5, 8), torch.arange(5).unsqueeze(0)
    xpos = XPos(8, gamma=1e12)
    rotation = xpos.rotation(positions, x.device)
    from_rope = torch.stack([torch.einsum("ij,hj->hi", rotation_matrix(n, 8), x[0, :, n].double()) for n in range(5)],
                            dim=1)
    assert torch.allclose(xpos.rotate(x, rotation)[0].double(), from_rope, atol=1e-5)
    assert torch.allclose(xpos.rotate_key(x, rotation)[0].double(), from_rope, atol=1e-5)


def test_presets_put_xpos_in_the_decoder_and_rope_in_the_encoder():
    model, _ = build_model(["--xpos-scale-base", "64", "--rope-base", "500"], arch="xpos_transformer_tiny")
    assert all(type(layer.self_attn) is RopeAttention for layer in model.encoder.layers)
    decoder = [layer.self_attn for layer in model.decoder.layers]
    assert all(type(m) is XPosAttention and m.transform.scale_base == 64 and m.transform.base == 500
               for m in decoder)
    assert model.decoder.embed_positions is None and not list(decoder[0].transform.parameters())
    with pytest.raises(ValueError, match="--encoder-self-mixer xpos: mixer 'xpos' cannot serve the encoder_self"):
        build_model(["--encoder-self-mixer", "xpos"])


def test_xpos_model_decodes_as_it_trains():
    model, task = build_model(["--xpos-scale-base", "4"], arch="xpos_transformer_tiny")
    assert_decodes_as_it_trains(model, task, target_lengths=(9, 3))
