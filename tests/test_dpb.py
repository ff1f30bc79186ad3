"""The dynamic position bias (mixers/dpb.py): MLP(sign(d) log(1 + |d|)) re-derived per pair, its presets, flags."""
import math

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model
from posnet_fairseq.mixers.dpb import DynamicPositionBias, DynamicPositionBiasAttention, log_distance


def formula(bias, i, j):
    """The MLP written out in float64 at d = i - j: Linear, then [SiLU, Linear] per further layer."""
    d = i - j
    x = torch.tensor([math.copysign(math.log(1 + abs(d)), d)], dtype=torch.float64)
    linears = [m for m in bias.mlp if isinstance(m, torch.nn.Linear)]
    x = linears[0].weight.double() @ x + linears[0].bias.double()
    for layer in linears[1:]:
        x = layer.weight.double() @ (x * torch.sigmoid(x)) + layer.bias.double()
    return x


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_bias_is_the_mlp_of_the_signed_log_distance(depth):
    torch.manual_seed(depth)
    bias = DynamicPositionBias(3, width=8, depth=depth)
    positions = torch.arange(10).unsqueeze(0)
    table = bias(positions, positions)
    assert table.shape == (1, 3, 10, 10) and table.dtype == torch.float32
    assert len([m for m in bias.mlp if isinstance(m, torch.nn.Linear)]) == depth + 1
    worst = max((table[0, :, i, j].double() - formula(bias, i, j)).abs().max().item()
                for i in range(10) for j in range(10))
    assert worst <= 1e-5


def test_direction_is_kept_and_far_distances_are_compressed():
    x = log_distance(torch.tensor([-3, 0, 3, 1000]))  # given j - i
    assert x.tolist() == pytest.approx([math.log(4), 0.0, -math.log(4), -math.log(1001)], abs=1e-6)


def test_the_bias_stays_fp32_under_autocast():
    torch.manual_seed(2)
    bias = DynamicPositionBias(4)
    positions = torch.arange(9).unsqueeze(0)
    reference = bias(positions, positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(bias(positions, positions), reference)


def test_one_mlp_per_stack_shared_by_its_layers():
    model, _ = build_model(["--dpb-width", "12", "--dpb-depth", "3"], arch="dpb_transformer_tiny")
    encoder = [layer.self_attn for layer in model.encoder.layers]
    decoder = [layer.self_attn for layer in model.decoder.layers]
    assert all(type(m) is DynamicPositionBiasAttention for m in encoder + decoder)
    assert len({id(m.position_bias) for m in encoder}) == 1 and len({id(m.position_bias) for m in decoder}) == 1
    assert encoder[0].position_bias is not decoder[0].position_bias
    assert encoder[0].position_bias.mlp[0].out_features == 12
    names = [n for n in model.state_dict() if ".mlp." in n]
    assert len(names) == 2 * 2 * 4  # (encoder, decoder) x (weight, bias) x 4 Linear layers, stored once
    with pytest.raises(ValueError, match="--dpb-depth 0: must be a positive integer"):
        build_model(["--dpb-depth", "0"], arch="dpb_transformer_tiny")


def test_parameters_at_base_size():
    """One MLP 1 -> 32 -> 32 -> 8 heads per encoder/decoder (docs/position-schemes.md)."""
    transformer = sum(p.numel() for p in build_model(arch="posnet_transformer_base", dims=[])[0].parameters())
    dpb = sum(p.numel() for p in build_model(arch="dpb_transformer_base", dims=[])[0].parameters())
    assert transformer == 44181504 and dpb - transformer == 2 * (33 * 8 + 1120)


def test_model_decodes_as_it_trains():
    model, task = build_model(arch="dpb_transformer_tiny")
    assert_decodes_as_it_trains(model, task)
