"""Seq2seq ALiBi (mixers/alibi_seq2seq.py): its formula re-derived per distance, its flags and presets."""

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model
from posnet_fairseq.mixers.alibi import AlibiBias
from posnet_fairseq.mixers.alibi_seq2seq import Seq2seqAlibiAttention, Seq2seqAlibiBias


def geometric_slopes(n):
    """Press et al. section 3 for n a power of two: 2^(-8h/n), h = 1..n."""
    return [2 ** (-8 * h / n) for h in range(1, n + 1)]


def formula(i, j, slope, after_slope, shift, directional):
    """-m |i - j - s| (keys before the query, and every key unless directional); directional keys after the
    query: -m' (j - i + s)."""
    offset = i - j - shift
    if directional and j > i:
        return -after_slope * abs(offset)
    return -slope * abs(offset)


@pytest.mark.parametrize("directional", [False, True])
def test_bias_is_the_formula_with_trained_slopes_and_shifts(directional):
    bias = Seq2seqAlibiBias(4, trainable=True, head_shift=True, directional=directional)
    with torch.no_grad():  # values training could reach, distinct per head
        bias.slopes.copy_(torch.tensor([0.7, 0.2, -0.1, 0.05]))
        bias.shift.copy_(torch.tensor([0.0, 1.5, -2.0, 3.0]))
        if directional:
            bias.after_slopes.copy_(torch.tensor([0.3, 0.9, 0.4, 0.01]))
    positions = torch.arange(9).unsqueeze(0)
    table = bias(positions, positions)
    assert table.shape == (1, 4, 9, 9) and table.dtype == torch.float32
    after = bias.after_slopes.tolist() if directional else [None] * 4
    worst = max(abs(table[0, h, i, j].item() - formula(i, j, bias.slopes[h].item(), after[h], bias.shift[h].item(),
                                                         directional))
                for h in range(4) for i in range(9) for j in range(9))
    assert worst <= 1e-5


def test_initialised_it_is_alibi():
    positions = torch.arange(11).unsqueeze(0)
    reference = AlibiBias(8)(positions, positions)
    for options in ({}, {"head_shift": True}, {"directional": True}, {"trainable": False}):
        bias = Seq2seqAlibiBias(8, **options)
        assert torch.allclose(bias(positions, positions), reference, atol=1e-7)
    assert Seq2seqAlibiBias(8).slopes.tolist() == pytest.approx(geometric_slopes(8), abs=1e-7)


def test_gradients_reach_slopes_and_shifts():
    bias = Seq2seqAlibiBias(2, head_shift=True, directional=True)
    positions = torch.arange(6).unsqueeze(0)
    (bias(positions, positions) * torch.randn(1, 2, 6, 6)).sum().backward()
    assert bias.slopes.grad.abs().min() > 0 and bias.after_slopes.grad.abs().min() > 0
    assert bias.shift.grad is not None and bias.shift.grad.abs().min() > 0


def test_fixed_slopes_have_no_parameters_and_stay_exact_in_half_precision():
    model, _ = build_model(["--alibi-seq2seq-slopes", "fixed"], arch="alibi_seq2seq_transformer_tiny")
    mixer = model.half().encoder.layers[0].self_attn
    assert not list(mixer.position_bias.parameters())
    assert mixer.position_bias.profile(torch.tensor([-2, 0, 3])).dtype == torch.float32
    assert list(mixer.position_bias.fixed_slopes) == geometric_slopes(mixer.num_heads)


def test_presets_and_flags():
    model, _ = build_model(["--alibi-seq2seq-encoder", "directional", "--alibi-seq2seq-head-shift"],
                           arch="alibi_seq2seq_transformer_tiny")
    encoder = [layer.self_attn.position_bias for layer in model.encoder.layers]
    decoder = [layer.self_attn.position_bias for layer in model.decoder.layers]
    assert all(type(layer.self_attn) is Seq2seqAlibiAttention for layer in model.decoder.layers)
    assert all(b.directional and b.trainable and b.shift is not None for b in encoder)
    assert not any(b.directional for b in decoder)  # the causal mask leaves no key after the query
    default, _ = build_model(arch="alibi_seq2seq_transformer_tiny")
    bias = default.encoder.layers[0].self_attn.position_bias
    assert bias.trainable and bias.shift is None and not bias.directional
    with pytest.raises(ValueError, match="--alibi-seq2seq-encoder directional: .*--alibi-seq2seq-slopes trainable"):
        build_model(["--alibi-seq2seq-encoder", "directional", "--alibi-seq2seq-slopes", "fixed"],
                    arch="alibi_seq2seq_transformer_tiny")


def test_parameters_at_base_size():
    """8 slopes per layer; with shifts and the directional encoder 8 more each (docs/position-schemes.md)."""
    def count(arch, *flags):
        return sum(p.numel() for p in build_model(list(flags), arch=arch, dims=[])[0].parameters())

    transformer = count("posnet_transformer_base")
    assert transformer == 44181504
    assert count("alibi_seq2seq_transformer_base") - transformer == 12 * 8
    assert count("alibi_seq2seq_transformer_base", "--alibi-seq2seq-head-shift", "--alibi-seq2seq-encoder",
                 "directional") - transformer == 12 * 8 + 12 * 8 + 6 * 8
    assert count("alibi_seq2seq_transformer_base", "--alibi-seq2seq-slopes", "fixed") == transformer


def test_model_decodes_as_it_trains():
    model, task = build_model(["--alibi-seq2seq-head-shift"], arch="alibi_seq2seq_transformer_tiny")
    with torch.no_grad():
        for layer in model.decoder.layers:
            layer.self_attn.position_bias.shift.uniform_(-2, 2)
    assert_decodes_as_it_trains(model, task)
