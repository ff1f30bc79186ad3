"""SSRU (posnet_fairseq/mixers/ssru.py): the parallel scan against the recurrence as a
loop in float64 up to length 1024, extreme forget gates, fp16/bf16, decoding with a
state that does not grow, padding, and the parameter counts of AAN+ Tables 2 and 4.
The mixer contract (padding, incremental decoding, beam reordering, numerics) runs in
tests/test_mixer_contract.py."""
import pytest
import torch

import aan_plus_params as paper
from fairseq_testing import build_model
from posnet_fairseq.mixers.ssru import SSRU, linear_recurrence

D = 16


def ssru(seed=0, gate_scale=1.0, gate_bias=0.0):
    """An SSRU mixer whose forget-gate pre-activations are scaled (large scale: gates near 0 and 1)."""
    torch.manual_seed(seed)
    mixer = SSRU(D, 2).eval()
    with torch.no_grad():
        mixer.forget_gate.weight.mul_(gate_scale)
        mixer.forget_gate.bias.uniform_(-1, 1).add_(gate_bias)
    return mixer


def naive(mixer, x, pad=None):
    """Eqs. 1-3 step by step in float64: f = sigmoid(W_f x + b_f), c = f c + (1 - f) W x, o = ReLU(c).

    ``pad`` (B x T, True = pad) steps leave the cell unchanged and output ReLU of it.
    """
    W, Wf, bf = (p.detach().double() for p in (mixer.linear.weight, mixer.forget_gate.weight, mixer.forget_gate.bias))
    x = x.double()
    cell = torch.zeros(x.size(1), x.size(2), dtype=torch.float64)
    outputs = []
    for t in range(x.size(0)):
        f = torch.sigmoid(x[t] @ Wf.T + bf)
        new = f * cell + (1 - f) * (x[t] @ W.T)
        cell = new if pad is None else torch.where(pad[:, t : t + 1], cell, new)
        outputs.append(torch.relu(cell))
    return torch.stack(outputs)


@pytest.mark.parametrize("length", [1, 2, 3, 7, 64, 1024])
def test_scan_equals_the_recurrence_loop(length):
    mixer = ssru()
    x = torch.randn(length, 3, D, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        out, weights = mixer(x, x, x)
    assert weights is None
    torch.testing.assert_close(out.double(), naive(mixer, x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("gate_bias", [-40.0, 0.0, 40.0], ids=["f_to_0", "mixed", "f_to_1"])
def test_extreme_forget_gates(gate_bias):
    """Gates saturated at 0 (log f ~ -1e2 per step: exp of the cumulative log-gate would
    overflow), at 1 (f rounds to 1 in fp32: the cell keeps its past), and both mixed."""
    mixer = ssru(gate_scale=30.0, gate_bias=gate_bias)
    x = torch.randn(1024, 2, D, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = mixer(x, x, x)[0]
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), naive(mixer, x), atol=1e-5, rtol=1e-5)


def test_linear_recurrence_with_initial_state():
    g = torch.Generator().manual_seed(3)
    a, b, c0 = torch.rand(37, 2, 5, generator=g), torch.randn(37, 2, 5, generator=g), torch.randn(2, 5, generator=g)
    expected, c = [], c0.double()
    for t in range(37):
        c = a[t].double() * c + b[t].double()
        expected.append(c)
    torch.testing.assert_close(linear_recurrence(a, b, c0).double(), torch.stack(expected), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_is_finite_and_close(dtype):
    mixer = ssru(gate_scale=10.0)
    x = torch.randn(1024, 2, D, generator=torch.Generator().manual_seed(7))
    half = SSRU(D, 2).to(dtype).eval()
    half.load_state_dict({k: v.to(dtype) for k, v in mixer.state_dict().items()})
    with torch.no_grad():
        out = half(x.to(dtype), None, None)[0]
        reference = mixer(x.to(dtype).float(), None, None)[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    # The projections run in the half dtype (relative error ~2^-8 for bf16), the recurrence in fp32.
    assert (out.float() - reference).abs().max() <= 0.05 * reference.abs().max()


def test_decoding_state_is_one_vector_per_sentence():
    """Step by step (and in blocks) equals teacher forcing; the state is the B x C cell at every step."""
    mixer = ssru()
    x = torch.randn(50, 3, D, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        full = mixer(x, x, x)[0]
        state, steps = {}, []
        for t in range(50):
            steps.append(mixer(x[t : t + 1], None, None, incremental_state=state)[0])
            buffer = mixer._get_input_buffer(state)
            assert list(buffer) == ["cell"] and buffer["cell"].shape == (3, D)
        torch.testing.assert_close(torch.cat(steps), full, atol=1e-6, rtol=1e-6)
        state = {}
        blocks = [mixer(x[lo:hi], None, None, incremental_state=state)[0] for lo, hi in ((0, 1), (1, 20), (20, 50))]
        torch.testing.assert_close(torch.cat(blocks), full, atol=1e-6, rtol=1e-6)


def test_pad_steps_leave_the_cell_unchanged():
    """Left-padded targets give the real tokens the outputs they have alone."""
    mixer = ssru()
    x = torch.randn(9, 2, D, generator=torch.Generator().manual_seed(11))
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[1, :4] = True  # sentence 1: 4 pads, then 5 tokens
    pad[0, 7:] = True  # sentence 0: right padding
    with torch.no_grad():
        out = mixer(x, x, x, key_padding_mask=pad)[0]
        alone = mixer(x[4:, 1:2], None, None)[0]
    torch.testing.assert_close(out[4:, 1:2], alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.double(), naive(mixer, x, pad), atol=1e-5, rtol=1e-5)


def test_preset_puts_ssru_in_every_decoder_layer_only():
    model, _ = build_model(arch="ssru_tiny")
    assert all(isinstance(layer.self_attn, SSRU) for layer in model.decoder.layers)
    assert not any(isinstance(m, SSRU) for m in model.encoder.modules())
    assert not any(isinstance(layer.encoder_attn, SSRU) for layer in model.decoder.layers)


def test_encoder_site_is_refused():
    with pytest.raises(ValueError, match="--encoder-self-mixer ssru: mixer 'ssru' cannot serve the encoder_self site"):
        build_model(["--encoder-self-mixer", "ssru"])


@pytest.fixture(scope="module")
def table_counts():
    return {key: paper.count(*key) for key in paper.PAPER}


def test_parameters_match_aan_plus_tables_2_and_4(table_counts):
    """SSRU 69.16M / 110.14M / 220.10M (base / deep / big) against the Transformer's
    72.31M / 116.45M / 232.70M: W (no bias) and W_f (bias), no output projection,
    2d^2 + d per decoder layer where self-attention has 4d^2 + 4d."""
    for size, layers, d in (("base", 6, 512), ("deep", 12, 512), ("big", 6, 1024)):
        ssru_params, transformer_params = table_counts["ssru", size][0], table_counts["transformer", size][0]
        assert transformer_params - ssru_params == layers * (4 * d * d + 4 * d - (2 * d * d + d))
        for model in ("transformer", "ssru"):
            assert paper.millions(table_counts[model, size][0]) == paper.PAPER[model, size], (model, size)


def test_the_tables_fix_the_vocabulary(table_counts):
    """All 18 counts of Tables 2 and 4 (WET aside, see aan_plus_params.py) agree with one
    embedding table of 55,023 or 55,024 rows and with no other size: the vocabulary the
    parameter test uses is the paper's."""
    rows = table_counts["transformer", "base"][1]
    assert rows == paper.PAPER_WORDS + 4
    assert paper.consistent_rows(table_counts, range(50000, 60000)) == [55023, 55024]
