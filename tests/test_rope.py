"""RoPE (mixers/rope.py) against RoFormer's formulas, re-derived here from the paper (Su et al., 2021)."""
import math

import pytest
import torch

from fairseq_testing import build_model, decode_incrementally, random_batch
from posnet_fairseq.mixers.rope import RopeAttention, Rotary


def rotation_matrix(m, d, base=10000.0):
    """R^d_{Theta,m} of Eq. 15 as a dense d x d float64 matrix: 2 x 2 blocks rot(m theta_i), theta_i = base^(-2(i-1)/d)."""
    r = torch.zeros(d, d, dtype=torch.float64)
    for i in range(1, d // 2 + 1):
        theta = base ** (-2 * (i - 1) / d)
        c, s = math.cos(m * theta), math.sin(m * theta)
        a, b = 2 * i - 2, 2 * i - 1  # 0-based rows of dimensions 2i-1, 2i
        r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


@pytest.mark.parametrize("d,base", [(8, 10000.0), (32, 10000.0), (16, 100.0)])
def test_rotation_is_eq_15(d, base):
    torch.manual_seed(0)
    rotary = Rotary(d, base)
    positions = torch.tensor([[0, 1, 2, 5, 17, 40, 63]])
    x = torch.randn(1, 3, positions.size(1), d)
    out = rotary(x, positions)
    worst = 0.0
    for t, m in enumerate(positions[0].tolist()):
        expected = torch.einsum("ij,hj->hi", rotation_matrix(m, d, base), x[0, :, t].double())
        worst = max(worst, (out[0, :, t].double() - expected).abs().max().item())
    assert worst <= 1e-5, worst


def test_dot_products_depend_on_the_distance_only_eq_16():
    torch.manual_seed(1)
    d = 16
    rotary = Rotary(d)
    q, k = torch.randn(1, 1, 1, d), torch.randn(1, 1, 1, d)
    for m, n in ((0, 3), (5, 8), (40, 43), (3, 0), (50, 47)):
        rq = rotary(q, torch.tensor([[m]]))[0, 0, 0].double()
        rk = rotary(k, torch.tensor([[n]]))[0, 0, 0].double()
        expected = q[0, 0, 0].double() @ rotation_matrix(n - m, d) @ k[0, 0, 0].double()  # Eq. 16
        assert abs((rq @ rk).item() - expected.item()) <= 1e-5


def test_mixer_is_attention_over_rotated_queries_and_keys():
    """The whole mixer equals softmax((R_m W_q x_m)^T (R_n W_k x_n) / sqrt(d_h)) W_v x_n, written out here."""
    torch.manual_seed(2)
    mixer = RopeAttention(16, 2, transform=Rotary(8)).eval()
    x = torch.randn(5, 1, 16)
    out, _ = mixer(x, x, x)
    q, k, v = (proj(x)[:, 0].double() for proj in (mixer.q_proj, mixer.k_proj, mixer.v_proj))
    heads = []
    for h in range(2):
        cols = slice(8 * h, 8 * h + 8)
        rq = torch.stack([rotation_matrix(m, 8) @ q[m, cols] for m in range(5)])
        rk = torch.stack([rotation_matrix(n, 8) @ k[n, cols] for n in range(5)])
        heads.append(torch.softmax(rq @ rk.t() / math.sqrt(8), dim=-1) @ v[:, cols])
    expected = torch.cat(heads, dim=-1) @ mixer.out_proj.weight.double().t() + mixer.out_proj.bias.double()
    assert (out[:, 0].double() - expected).abs().max().item() <= 1e-5


def test_no_parameters_and_odd_head_dim_refused():
    assert not list(Rotary(8).parameters())
    with pytest.raises(ValueError, match="head dimension 7"):
        Rotary(7)
    with pytest.raises(ValueError, match="--rope-base 1.0: must be greater than 1"):
        build_model(["--encoder-self-mixer", "rope", "--rope-base", "1"])


def test_frequencies_stay_fp32_in_a_half_precision_model():
    model, _ = build_model(arch="rope_transformer_tiny")
    rotary = model.half().encoder.layers[0].self_attn.transform
    assert rotary.frequencies(torch.device("cpu")).dtype == torch.float32


def test_rope_model_is_order_sensitive_without_position_embeddings():
    model, task = build_model(arch="rope_transformer_tiny")
    d = task.source_dictionary
    src, lengths, prev = random_batch(d, [6], [5])
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        swapped = src.clone()
        swapped[0, [1, 2]] = swapped[0, [2, 1]]
        assert not torch.allclose(out, model(swapped, lengths, prev)[0], atol=1e-4)
    assert torch.allclose(decode_incrementally(model, src, lengths, prev), out, atol=1e-5)
