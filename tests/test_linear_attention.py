"""Linear attention (posnet_fairseq/mixers/linear_attention.py): the chunked causal form
and the encoder form against the kernel formula written out per query in float64, across
chunk boundaries up to length 1024, fp16/bf16, decoding with S/z states that do not
grow, padding, and the parameter counts of AAN+ Tables 2 and 4. The mixer contract
runs in tests/test_mixer_contract.py."""
import pytest
import torch
import torch.nn.functional as F

import aan_plus_params as paper
from fairseq_testing import build_model
from posnet_fairseq.mixers.linear_attention import CHUNK, LinearAttention

D, H = 16, 2


def mixer(causal=True, seed=0):
    torch.manual_seed(seed)
    module = LinearAttention(D, H, causal).eval()
    with torch.no_grad():  # non-zero biases, so that every projection is exercised
        for proj in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
            proj.bias.uniform_(-0.5, 0.5)
    return module


def naive(module, x, causal, pad=None):
    """Eqs. 7-11 per query in float64: out_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j)
    over the real keys j (j <= i when causal), then W_o; a query with no key outputs W_o(0)."""
    def proj(linear, t):
        return t @ linear.weight.detach().double().T + linear.bias.detach().double()

    x = x.double()
    T, B, _ = x.shape
    q, k, v = (proj(p, x).view(T, B, H, D // H) for p in (module.q_proj, module.k_proj, module.v_proj))
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    out = torch.zeros(T, B, H, D // H, dtype=torch.float64)
    for b in range(B):
        for i in range(T):
            keys = [j for j in range(T) if (not causal or j <= i) and (pad is None or not pad[b, j])]
            if not keys:
                continue
            sim = torch.stack([(phi_q[i, b] * phi_k[j, b]).sum(-1) for j in keys])  # keys x H
            out[i, b] = (sim.unsqueeze(-1) * v[keys, b]).sum(0) / sim.sum(0).unsqueeze(-1)
    return proj(module.out_proj, out.reshape(T, B, D))


def quadratic(module, x, causal):
    """The same formula as one masked T x T kernel matrix per head (for long inputs), float64."""
    def proj(linear, t):
        return t @ linear.weight.detach().double().T + linear.bias.detach().double()

    x = x.double()
    T, B, _ = x.shape
    q, k, v = (proj(p, x).view(T, B, H, D // H).permute(1, 2, 0, 3) for p in
               (module.q_proj, module.k_proj, module.v_proj))
    sim = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)
    if causal:
        sim = sim.tril()
    out = (sim @ v) / sim.sum(-1, keepdim=True)
    return proj(module.out_proj, out.permute(2, 0, 1, 3).reshape(T, B, D))


@pytest.mark.parametrize("causal", [True, False], ids=["decoder", "encoder"])
@pytest.mark.parametrize("length", [1, 5, CHUNK, CHUNK + 1, 2 * CHUNK + 7])
def test_equals_the_kernel_formula(length, causal):
    module = mixer(causal)
    x = torch.randn(length, 2, D, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        out, weights = module(x, x, x)
    assert weights is None
    torch.testing.assert_close(out.double(), naive(module, x, causal), atol=1e-5, rtol=1e-5)


def test_length_1024_equals_the_quadratic_form():
    module = mixer()
    x = 3 * torch.randn(1024, 2, D, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        out = module(x, x, x)[0]
    torch.testing.assert_close(out.double(), quadratic(module, x, True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_is_finite_and_close(dtype):
    """Sums over 1024 keys of phi(k) v^T exceed fp16's range unless kept in fp32."""
    module = mixer()
    x = 4 * torch.randn(1024, 2, D, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        module.v_proj.weight.mul_(50)  # values ~ 1e2-1e3: their prefix sums pass 65504
        xr = x.to(dtype).float()
        reference = module(xr, xr, xr)[0]
        half = LinearAttention(D, H, True).to(dtype).eval()
        half.load_state_dict({k: v.to(dtype) for k, v in module.state_dict().items()})
        xh = x.to(dtype)
        out = half(xh, xh, xh)[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert (out.float() - reference).abs().max() <= 0.05 * reference.abs().max()


def test_decoding_state_does_not_grow():
    """Step by step and in blocks (crossing chunk boundaries) equals teacher forcing; the
    state is S (B x H x D_h x D_h) and z (B x H x D_h) at every step."""
    module = mixer()
    T, B = CHUNK + 30, 3
    x = torch.randn(T, B, D, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        full = module(x, x, x)[0]
        state, steps = {}, []
        for t in range(T):
            steps.append(module(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0])
            buffer = module._get_input_buffer(state)
            assert sorted(buffer) == ["S", "z"]
            assert buffer["S"].shape == (B, H, D // H, D // H) and buffer["z"].shape == (B, H, D // H)
        torch.testing.assert_close(torch.cat(steps), full, atol=1e-5, rtol=1e-5)
        state, blocks = {}, []
        for lo, hi in ((0, 10), (10, 11), (11, T)):
            blocks.append(module(x[lo:hi], x[lo:hi], x[lo:hi], incremental_state=state)[0])
        torch.testing.assert_close(torch.cat(blocks), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [True, False], ids=["decoder", "encoder"])
def test_pad_keys_are_excluded(causal):
    module = mixer(causal)
    x = torch.randn(8, 2, D, generator=torch.Generator().manual_seed(10))
    pad = torch.zeros(2, 8, dtype=torch.bool)
    pad[0, :3] = True  # left padding
    pad[1, 6:] = True  # right padding
    with torch.no_grad():
        out = module(x, x, x, key_padding_mask=pad)[0]
    real = ~pad.t()
    torch.testing.assert_close(out.double()[real], naive(module, x, causal, pad)[real], atol=1e-5, rtol=1e-5)


def test_preset_puts_linear_attention_in_every_decoder_layer_only():
    model, _ = build_model(arch="linear_attention_tiny")
    assert all(isinstance(layer.self_attn, LinearAttention) for layer in model.decoder.layers)
    assert not any(isinstance(m, LinearAttention) for m in model.encoder.modules())


def test_parameters_match_aan_plus_tables_2_and_4():
    """72.31M / 116.45M / 232.70M (base / deep / big), the Transformer's own counts: the
    mixer has MHA's four projections with bias. The vocabulary is the one the tables fix
    (aan_plus_params.py; tests/test_ssru.py checks that derivation)."""
    for size in ("base", "deep", "big"):
        params = paper.count("linear_attention", size)[0]
        assert params == paper.count("transformer", size)[0]
        assert paper.millions(params) == paper.PAPER["linear_attention", size]
