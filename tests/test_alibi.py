"""ALiBi (mixers/alibi.py) against Press et al. (ICLR 2022), section 3, re-derived here."""

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model
from posnet_fairseq.mixers.alibi import AlibiAttention, AlibiBias, alibi_slopes, slope_column


def paper_slopes(n):
    """Section 3: for 2^k heads the geometric sequence 2^(-8/n), 2^(-16/n), ...; otherwise the slopes of the
    closest lower power of two p, then the odd-numbered ones (1st, 3rd, ...) of 2p, as many as are missing."""
    def geometric(count):
        return [2 ** (-8 * h / count) for h in range(1, count + 1)]

    p = 1 << (n.bit_length() - 1)
    if p == n:
        return geometric(n)
    return geometric(p) + geometric(2 * p)[0::2][: n - p]


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 40, 48, 64, 96])
def test_slopes_follow_the_papers_rule(heads):
    ours = alibi_slopes(heads)
    assert len(ours) == heads
    assert max(abs(a - b) for a, b in zip(ours, paper_slopes(heads))) <= 1e-12


def test_slopes_worked_examples():
    assert alibi_slopes(8) == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]  # the paper's example
    # 6 heads: the 4 of 2^(-2h), then 2^(-1), 2^(-3) (1st and 3rd of the 8-head sequence).
    assert alibi_slopes(6) == pytest.approx([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3], abs=1e-12)
    assert alibi_slopes(3) == pytest.approx([2 ** -4, 2 ** -8, 2 ** -2], abs=1e-12)
    with pytest.raises(ValueError, match="at least one attention head"):
        alibi_slopes(0)


@pytest.mark.parametrize("heads", [4, 6])
def test_bias_is_minus_slope_times_distance(heads):
    bias = AlibiBias(heads)
    positions = torch.arange(11).unsqueeze(0)
    table = bias(positions, positions)
    assert table.shape == (1, heads, 11, 11) and table.dtype == torch.float32
    slopes = paper_slopes(heads)
    worst = max(abs(table[0, h, i, j].item() - (-slopes[h] * abs(j - i)))
                for h in range(heads) for i in range(11) for j in range(11))
    assert worst <= 1e-5
    # Causal rows (keys j <= i) are the paper's m * [-(i-1), ..., -1, 0] (1-based i).
    for i in range(11):
        expected = torch.tensor([-(i - j) for j in range(i + 1)], dtype=torch.float32) * slopes[1]
        assert torch.allclose(table[0, 1, i, : i + 1], expected, atol=1e-6)


def test_decoding_step_bias_is_the_last_row():
    bias = AlibiBias(4)
    full = bias(torch.arange(7).unsqueeze(0), torch.arange(7).unsqueeze(0))
    step = bias(torch.tensor([[6]]), torch.arange(7).unsqueeze(0))
    assert torch.equal(step[0, :, 0], full[0, :, 6])


def test_no_parameters_and_slopes_exact_in_half_precision():
    model, task = build_model(arch="alibi_transformer_tiny")
    mixers = [layer.self_attn for layer in (*model.encoder.layers, *model.decoder.layers)]
    assert all(type(m) is AlibiAttention for m in mixers)
    assert not any(list(m.position_bias.parameters()) for m in mixers)
    mixer = model.half().encoder.layers[0].self_attn
    assert mixer.position_bias.profile(torch.tensor([-3, 0, 5])).dtype == torch.float32
    assert mixer.position_bias.slopes == tuple(paper_slopes(mixer.num_heads))


def test_alibi_model_decodes_as_it_trains():
    model, task = build_model(arch="alibi_transformer_tiny")
    assert_decodes_as_it_trains(model, task)


def test_the_slopes_reach_a_device_once_not_at_every_call():
    """Issue 48: copying the slopes to a GPU at every call waited for its queue; the column is made once per
    device (here first while decoding, under inference mode) and serves a training call after it."""
    bias = AlibiBias(6)
    distances = torch.arange(-3, 4)
    with torch.inference_mode():
        bias.profile(distances)
    column = slope_column(bias.slopes, distances.device)
    assert not column.is_inference() and column is slope_column(bias.slopes, distances.device)
    expected = torch.tensor([[-m * abs(d) for d in range(-3, 4)] for m in bias.slopes])
    torch.testing.assert_close(bias.profile(distances), expected, atol=0, rtol=0)
