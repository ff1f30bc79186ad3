"""FIRE (mixers/fire.py) against Li et al. (ICLR 2024), section 3, re-derived here pair by pair."""
import math

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model
from posnet_fairseq.mixers.fire import FireAttention, FireBias


def paper_bias(bias, i, j, n, causal):
    """b(i, j) = f_theta(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1), written as scalars in float64;
    the encoder: the signed psi(|i - j|) over psi(max(L, the longest distance query i sees in n tokens))."""
    c = abs(bias.c.item())
    threshold = abs(bias.threshold_scale.item()) * bias.init_threshold
    reach = i if causal else max(i, n - 1 - i)
    x = math.copysign(math.log(c * abs(i - j) + 1), i - j) / math.log(c * max(threshold, reach) + 1)
    w1, b1 = bias.mlp[0].weight.double()[:, 0], bias.mlp[0].bias.double()
    w2, b2 = bias.mlp[2].weight.double(), bias.mlp[2].bias.double()
    return w2 @ torch.relu(w1 * x + b1) + b2  # H values: the MLP 1 -> W -> H with a ReLU


@pytest.mark.parametrize("causal,threshold", [(True, 512.0), (True, 4.0), (False, 512.0), (False, 4.0)])
def test_bias_is_the_papers_formula(causal, threshold):
    torch.manual_seed(0)
    bias = FireBias(3, width=8, init_c=0.3, init_threshold=threshold, causal=causal)
    n = 12
    positions = torch.arange(n).unsqueeze(0)
    table = bias(positions, positions)
    assert table.shape == (1, 3, n, n) and table.dtype == torch.float32
    worst = max((table[0, :, i, j].double() - paper_bias(bias, i, j, n, causal)).abs().max().item()
                for i in range(n) for j in range(n))
    assert worst <= 1e-5


def test_the_threshold_decides_the_normaliser():
    """Below L every query is normalised by psi(L); beyond it by psi(i): the inputs then span [0, 1]."""
    bias = FireBias(2, init_c=1.0, init_threshold=4.0)
    positions = torch.arange(10).unsqueeze(0)
    x = bias.normalised_distances(positions, positions)[0]
    assert x[2, 0].item() == pytest.approx(math.log(3) / math.log(5), abs=1e-6)  # i = 2 < L: psi(L)
    assert x[9, 0].item() == pytest.approx(1.0, abs=1e-6)  # i = 9 > L: the farthest key is at 1
    assert x[9, 9].item() == 0.0


def test_encoder_inputs_are_signed_and_bounded():
    bias = FireBias(2, init_c=1.0, init_threshold=1.0, causal=False)
    positions = torch.arange(7).unsqueeze(0)
    x = bias.normalised_distances(positions, positions)[0]
    assert x[1, 6].item() == pytest.approx(-1.0, abs=1e-6) and x[6, 0].item() == pytest.approx(1.0, abs=1e-6)
    assert x.abs().max().item() <= 1.0 + 1e-6
    assert torch.equal(x, -x.flip(0, 1))  # mirrored sentence, mirrored sign


def test_left_padding_does_not_change_the_encoder_bias():
    """Real positions come from the padding mask, the sentence length from the farthest real key."""
    torch.manual_seed(1)
    bias = FireBias(2, init_threshold=2.0, causal=False)
    plain = bias(torch.arange(5).unsqueeze(0), torch.arange(5).unsqueeze(0))
    padded_positions = torch.tensor([[0, 0, 0, 1, 2, 3, 4]])  # two pads (position 0, masked) in front
    padded = bias(padded_positions, padded_positions)
    assert torch.allclose(padded[..., 2:, 2:], plain, atol=1e-6)


def test_c_and_the_threshold_are_learned():
    bias = FireBias(2, init_threshold=3.0)
    positions = torch.arange(8).unsqueeze(0)
    bias(positions, positions).sum().backward()
    assert bias.c.grad.abs().item() > 0 and bias.threshold_scale.grad.abs().item() > 0
    assert all(p.grad is not None for p in bias.mlp.parameters())


def test_the_bias_stays_fp32_under_autocast_and_in_a_half_model():
    torch.manual_seed(2)
    bias = FireBias(4, init_threshold=3.0)
    positions = torch.arange(9).unsqueeze(0)
    reference = bias(positions, positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(bias(positions, positions), reference)
    half = bias.half()(positions, positions)
    assert half.dtype == torch.float32 and torch.allclose(half, reference, atol=1e-2)


def test_presets_build_fire_with_a_module_per_layer_and_the_flags():
    model, _ = build_model(["--fire-mlp-width", "16", "--fire-init-threshold", "64"], arch="fire_transformer_tiny")
    mixers = [layer.self_attn for layer in (*model.encoder.layers, *model.decoder.layers)]
    assert all(type(m) is FireAttention for m in mixers)
    assert len({id(m.position_bias) for m in mixers}) == len(mixers)
    assert all(m.position_bias.mlp[0].out_features == 16 and m.position_bias.init_threshold == 64 for m in mixers)
    assert [m.position_bias.causal for m in mixers] == [False] * len(model.encoder.layers) + [True] * len(
        model.decoder.layers)
    with pytest.raises(ValueError, match="--fire-init-c 0.0: must be a positive number"):
        build_model(["--fire-init-c", "0"], arch="fire_transformer_tiny")


def test_parameters_at_base_size():
    """An MLP 1 -> 32 -> 8 heads, c and L in each of the 12 self-attention layers (docs/position-schemes.md)."""
    transformer = sum(p.numel() for p in build_model(arch="posnet_transformer_base", dims=[])[0].parameters())
    fire = sum(p.numel() for p in build_model(arch="fire_transformer_base", dims=[])[0].parameters())
    assert transformer == 44181504 and fire - transformer == 12 * (33 * 8 + 66)


def test_fire_model_decodes_as_it_trains_beyond_the_threshold():
    model, task = build_model(["--fire-init-threshold", "2"], arch="fire_transformer_tiny")
    assert_decodes_as_it_trains(model, task)
