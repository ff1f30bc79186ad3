"""PosNet's position-only attention through fused attention (mixers/fused_attention.py): the same function as
its explicit softmax and product, outputs and gradients, in every site and padding. The fused path runs where
PositionAttention.FUSED names the device (CUDA); here it is forced onto the CPU, where torch computes it as
its math path. Content attention's learned bias on the CPU (explicit_attention): torch's math path, outputs,
gradients and dropout draws."""
import pytest
import torch

from posnet_fairseq.mixers import fused_attention
from posnet_fairseq.mixers.attention import softmax_masks
from posnet_fairseq.mixers.posnet import PositionAttention
from fairseq_testing import build_model, random_batch
from test_posnet import DIM, KINDS, left_pad, make_mixer, right_pad

SITES = ("encoder_self", "decoder_self", "cross")


def inputs(site, padded):
    g = torch.Generator().manual_seed(1)
    T, S = 7, 9 if site == "cross" else 7
    query = torch.randn(T, 3, DIM, generator=g, requires_grad=True)
    value = torch.randn(S, 3, DIM, generator=g, requires_grad=True) if site == "cross" else query
    pad = None
    if padded:  # fairseq left-pads sources (encoder, cross keys) and right-pads targets
        pad = right_pad([7, 5, 3], T) if site == "decoder_self" else left_pad([S, 4, 2], S)
    return query, value, pad


def run(monkeypatch, mixer, site, padded, fused):
    """The mixer's output and the gradients of its parameters and inputs, fused or explicit."""
    monkeypatch.setattr(PositionAttention, "FUSED", ("cpu",) if fused else ())
    mixer.zero_grad()
    query, value, pad = inputs(site, padded)
    out = mixer(query, value, value, key_padding_mask=pad, static_kv=site == "cross")[0]
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = [p.grad.clone() for p in mixer.parameters() if p.grad is not None]
    return out.detach(), grads + [value.grad]  # (the query's tokens enter through the values only)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_fused_training_without_dropout_gives_the_explicit_outputs_and_gradients(monkeypatch, kind, site, padded):
    mixer = make_mixer(kind, site, gamma=1.5 if site == "cross" else 1.0)[0].train()
    assert mixer.dropout == 0.0
    fused_out, fused_grads = run(monkeypatch, mixer, site, padded, fused=True)
    out, grads = run(monkeypatch, mixer, site, padded, fused=False)
    torch.testing.assert_close(fused_out, out)
    assert len(fused_grads) == len(grads) and all(g.abs().max() > 0 for g in grads)
    for got, expected in zip(fused_grads, grads):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("site", SITES)
def test_fused_eval_gives_the_explicit_outputs_and_training_drops_weights(monkeypatch, kind, site):
    mixer = make_mixer(kind, site, gamma=1.5 if site == "cross" else 1.0)[0]
    mixer.dropout = 0.5
    with torch.no_grad():
        fused = run_forward(monkeypatch, mixer.eval(), site, fused=True)
        torch.testing.assert_close(fused, run_forward(monkeypatch, mixer, site, fused=False))
        # the fused kernel is given the dropout: training draws differ from the eval weights
        assert not torch.allclose(run_forward(monkeypatch, mixer.train(), site, fused=True), fused)


def run_forward(monkeypatch, mixer, site, fused):
    monkeypatch.setattr(PositionAttention, "FUSED", ("cpu",) if fused else ())
    query, value, pad = inputs(site, padded=True)
    return mixer(query, value, value, key_padding_mask=pad, static_kv=site == "cross")[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fused_bf16_training_attends_in_bf16_and_stays_near_fp32(monkeypatch, kind):
    """Under autocast the energies are the fused kernel's mask in its dtype (bf16), its softmax in fp32: the
    output is finite and within bf16 rounding of the fp32 one."""
    mixer = make_mixer(kind, "decoder_self")[0].train()
    out = run_forward(monkeypatch, mixer, "decoder_self", fused=False).detach()
    dtypes = []
    sdpa = fused_attention.F.scaled_dot_product_attention

    def recorded(q, k, v, attn_mask=None, **kwargs):
        dtypes.append((q.dtype, k.dtype, attn_mask.dtype))
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(fused_attention.F, "scaled_dot_product_attention", recorded)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = run_forward(monkeypatch, mixer, "decoder_self", fused=True)
    assert dtypes == [(torch.bfloat16,) * 3]
    assert torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), out, atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("keys", [5, 8, 30])
@pytest.mark.parametrize("masked", [False, True])
def test_the_mask_is_made_in_rows_that_the_memory_efficient_kernel_reads_in_place(keys, masked):
    """torch's memory-efficient attention copies (pads) a mask whose strides but the last are not multiples of
    8 elements, forward and backward: MaskedBias writes its mask into aligned rows, its values those of the
    masked cast, its gradient the bias's."""
    bias = torch.randn(1, 2, 3, keys, requires_grad=True)
    invalid = torch.rand(4, 1, 3, keys) < 0.3 if masked else None
    mask = fused_attention.MaskedBias.apply(bias, invalid, torch.bfloat16)
    assert mask.dtype == torch.bfloat16 and mask.stride(-1) == 1
    assert all(stride % fused_attention.MASK_ALIGNMENT == 0 for stride in mask.stride()[:-1]), mask.stride()
    expected = bias.detach().to(torch.bfloat16)
    if masked:
        expected = expected.masked_fill(invalid, float("-inf"))
    assert torch.equal(mask, expected)
    mask.float().masked_fill(mask.isinf(), 0).sum().backward()
    kept = torch.ones(1, 1, 3, keys) if invalid is None else (~invalid).float().sum(0, keepdim=True)
    torch.testing.assert_close(bias.grad, kept.expand(1, 2, -1, -1))


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_a_whole_models_fused_training_step_gives_the_explicit_outputs_and_gradients(monkeypatch, arch, padded):
    """Every layer of both sides at once (posnet_layers.py) through fused attention: the decoder's causal masks
    are B-sized while its energies without pads are one for the batch, so the layers' mask is B-sized (the
    H200 run of 2026-11-28 failed here, on the GPU's default path)."""
    model, task = build_model(["--dropout", "0", "--attention-dropout", "0"], arch=arch)
    model.train()
    lengths = (6, 4, 3) if padded else (5, 5, 5)
    src, src_lengths, prev = random_batch(task.source_dictionary, lengths, lengths)
    results = []
    for fused in (True, False):
        monkeypatch.setattr(PositionAttention, "FUSED", ("cpu",) if fused else ())
        model.zero_grad()
        logits = model(src, src_lengths, prev)[0]
        (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()
        results.append((logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                                          if p.grad is not None}))
    (fused_logits, fused_grads), (logits, grads) = results
    torch.testing.assert_close(fused_logits, logits)
    assert fused_grads.keys() == grads.keys() and any("q_proj" in name for name in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(fused_grads[name], grad, atol=1e-5 + 1e-6 * float(grad.abs().max()), rtol=1.3e-6)


def biased_inputs(dtype, bias_batch, masked):
    """q, k, v (B x H x T x d_h, as split_heads makes them: views of T x B x D), a learned bias and the masks
    (a padded batch whose last sentence is all pad: its rows are empty)."""
    g = torch.Generator().manual_seed(2)
    batch, heads, length, dim = 3, 2, 5, 4
    q, k, v = (torch.randn(length, batch, heads * dim, generator=g, dtype=dtype).requires_grad_() for _ in range(3))
    heads_of = [x.view(length, batch, heads, dim).permute(1, 2, 0, 3) for x in (q, k, v)]
    bias = torch.randn(bias_batch, heads, length, length, generator=g, dtype=dtype, requires_grad=True)
    invalid = None
    if masked:
        invalid = torch.zeros(batch, 1, 1, length, dtype=torch.bool)
        invalid[1, ..., 3:] = invalid[2] = True
        invalid = invalid | torch.ones(length, length, dtype=torch.bool).triu(1)
    return (q, k, v), heads_of, bias, softmax_masks(invalid, masked)


def attended(inputs, dropout, explicit):
    """fused_attention's output and the gradients of q, k, v and the bias: explicit (a bias that needs a gradient
    on the CPU) or torch's math path (the masked bias given to its scaled_dot_product_attention)."""
    leaves, (q, k, v), bias, masks = inputs
    torch.manual_seed(3)
    if explicit:
        out = fused_attention.fused_attention(q, k, v, bias, masks, dropout)
    else:
        mask = fused_attention.MaskedBias.apply(bias, masks[0], q.dtype)
        out = fused_attention.attend(q, k, v, mask, masks[1], dropout)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    return out, torch.autograd.grad((out * weights).sum(), (*leaves, bias))


@pytest.mark.parametrize("bias_batch", [1, 3])
@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_a_learned_bias_on_the_cpu_is_attended_as_torchs_math_path(monkeypatch, bias_batch, masked, dropout):
    """The same outputs and gradients (fp64 to rounding, fp32 to its tolerance), with dropout the same draws."""
    sdpa, calls = fused_attention.F.scaled_dot_product_attention, []
    monkeypatch.setattr(fused_attention.F, "scaled_dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or sdpa(*args, **kwargs))
    for dtype in (torch.float64, torch.float32):
        inputs = biased_inputs(dtype, bias_batch, masked)
        out, grads = attended(inputs, dropout, explicit=True)
        assert not calls  # not torch's kernel: the explicit products
        expected, expected_grads = attended(inputs, dropout, explicit=False)
        assert calls
        calls.clear()
        torch.testing.assert_close(out, expected)
        if masked:  # the empty rows (the all-pad sentence's) are zero, and pass no gradient
            assert out[2].abs().max() == 0 and (bias_batch == 1 or grads[3][2].abs().max() == 0)
        for got, want in zip(grads, expected_grads):
            assert want.abs().max() > 0
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "masked"])
def test_the_explicit_attentions_gradients_pass_gradcheck(masked):
    leaves, _, bias, masks = biased_inputs(torch.float64, 1, masked)

    def attention(q, k, v, bias):
        heads = [x.view(5, 3, 2, 4).permute(1, 2, 0, 3) for x in (q, k, v)]
        return fused_attention.fused_attention(*heads, bias, masks, 0.0)

    assert torch.autograd.gradcheck(attention, (*leaves, bias))


def test_a_bias_without_a_gradient_is_the_fused_kernels_mask():
    _, (q, k, v), bias, masks = biased_inputs(torch.float32, 1, True)
    explicit = fused_attention.fused_attention(q, k, v, bias, masks, 0.0)
    fused = fused_attention.fused_attention(q, k, v, bias.detach(), masks, 0.0)
    assert explicit.grad_fn is not None and "Baddbmm" not in type(fused.grad_fn).__name__
    torch.testing.assert_close(fused, explicit)
