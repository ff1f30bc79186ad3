"""KERPLE's logarithmic kernel (mixers/kerple.py) against Chi et al. (NeurIPS 2022), re-derived here."""
import math

import torch

from fairseq_testing import build_model
from posnet_fairseq.mixers.kerple import KerpleAttention, KerpleLogBias


def test_bias_is_the_log_kernel():
    torch.manual_seed(0)
    bias = KerpleLogBias(5)
    positions = torch.arange(40).unsqueeze(0)
    table = bias(positions, positions)
    assert table.shape == (1, 5, 40, 40) and table.dtype == torch.float32
    r1, r2 = bias.strength.tolist(), bias.rate.tolist()
    worst = max(abs(table[0, h, i, j].item() - (-r1[h] * math.log(1 + r2[h] * abs(i - j))))
                for h in range(5) for i in range(40) for j in range(40))
    assert worst <= 1e-5


def test_parameters_are_floored_at_the_authors_eps():
    bias = KerpleLogBias(2)
    with torch.no_grad():
        bias.strength.copy_(torch.tensor([-1.0, 0.5]))
        bias.rate.copy_(torch.tensor([0.3, -2.0]))
    k = bias.profile(torch.tensor([0, 3, -7]))
    assert torch.allclose(k[0], -0.01 * torch.log1p(0.3 * torch.tensor([0.0, 3.0, 7.0])))
    assert torch.allclose(k[1], -0.5 * torch.log1p(0.01 * torch.tensor([0.0, 3.0, 7.0])))


def test_initialisation_ranges_and_per_layer_parameters():
    torch.manual_seed(0)
    model, _ = build_model(arch="kerple_transformer_tiny")
    biases = [layer.self_attn.position_bias for layer in (*model.encoder.layers, *model.decoder.layers)]
    assert all(type(layer.self_attn) is KerpleAttention for layer in model.encoder.layers)
    assert len({id(b) for b in biases}) == len(biases)
    strength = torch.cat([b.strength for b in biases])
    rate = torch.cat([b.rate for b in biases])
    assert 0 <= strength.min() and strength.max() <= 2 and 0 <= rate.min() and rate.max() <= 1


def test_gradients_reach_both_parameters():
    bias = KerpleLogBias(3)
    positions = torch.arange(6).unsqueeze(0)
    bias(positions, positions).sum().backward()
    assert bias.strength.grad.abs().min() > 0 and bias.rate.grad.abs().min() > 0
