"""TISA (Wennberg & Henter, 2021) beyond the shared mixer contract."""
import copy
import math
import os

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.modules import MultiheadAttention

from fairseq_testing import build_model, decode_incrementally, random_batch, src_batch, step_mixer
from posnet_fairseq.mixers.shaw import ShawRelativeAttention
from posnet_fairseq.mixers.tisa import KernelSum, TisaAttention, TisaScorer, kernel_sums

REGRESSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "regression")
TISA = ["--encoder-self-mixer", "tisa", "--decoder-self-mixer", "tisa"]


def naive_f(scorer, h, k):
    return sum(
        scorer.amplitudes[h, s].item() * math.exp(-abs(scorer.sharpness[h, s].item())
                                                  * (k - scorer.offsets[h, s].item()) ** 2)
        for s in range(scorer.num_kernels)
    )


def test_scores_equal_the_formula_and_are_toeplitz():
    torch.manual_seed(0)
    scorer = TisaScorer(num_heads=3, num_kernels=5)
    n = 9
    positions = torch.arange(n).unsqueeze(0)
    scores = scorer(positions, positions)
    assert scores.shape == (1, 3, n, n) and scores.dtype == torch.float32
    for h in range(3):
        for i in range(n):
            for j in range(n):
                # The paper's orientation: F[h, i, j] = f_h(j - i).
                assert scores[0, h, i, j].item() == pytest.approx(naive_f(scorer, h, j - i), abs=1e-6)
    # Toeplitz: constant along every diagonal.
    assert torch.equal(scores[0, :, 1:, 1:], scores[0, :, :-1, :-1])
    # Not symmetric in general: f(k) != f(-k) for random centres.
    assert not torch.allclose(scores[0], scores[0].transpose(-1, -2))


def test_reference_parameters_map_to_the_papers_orientation():
    """The reference code builds F[i, j] = f(i - j - 1) from S x H parameters (anchors T3)."""
    torch.manual_seed(1)
    heads, kernels, n = 2, 4, 7
    c, a, b = torch.randn(kernels, heads) * 5, torch.randn(kernels, heads), torch.randn(kernels, heads)
    reference = torch.zeros(heads, n, n)
    for h in range(heads):
        for i in range(n):
            for j in range(n):
                k = i - j - 1
                reference[h, i, j] = (a[:, h] * torch.exp(-b[:, h].abs() * (c[:, h] - k) ** 2)).sum()
    scorer = TisaScorer(heads, kernels)
    scorer.load_reference_parameters(c, a, b)
    positions = torch.arange(n).unsqueeze(0)
    torch.testing.assert_close(scorer(positions, positions)[0], reference, atol=1e-6, rtol=0)


def test_local_init_is_deterministic_and_centred_on_minus_two_to_two():
    scorer = TisaScorer(num_heads=2, num_kernels=5, init="local")
    assert scorer.offsets.tolist() == [[-2.0, -1.0, 0.0, 1.0, 2.0]] * 2
    profile = scorer.profile(torch.arange(-6, 7))
    # A single bump around distance 0, symmetric.
    assert profile[0].argmax().item() == 6
    torch.testing.assert_close(profile[0], profile[0].flip(0))


def test_scores_stay_fp32_and_finite_for_a_half_precision_model():
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        scorer = TisaScorer(4, 5).to(dtype)
        positions = torch.arange(1024).unsqueeze(0)
        scores = scorer(positions[:, -3:], positions)
        assert scores.dtype == torch.float32 and torch.isfinite(scores).all()


def test_kernel_parameter_gradients_are_those_of_the_formula():
    torch.manual_seed(0)
    scorer = TisaScorer(2, 3, init="local")
    positions = torch.arange(6).unsqueeze(0)
    scorer(positions, positions).pow(2).sum().backward()
    # The same loss written from the formula F[h, i, j] = sum_s a exp(-|b| (j - i - c)^2), on copies.
    c, a, b = (p.detach().clone().requires_grad_() for p in (scorer.offsets, scorer.amplitudes, scorer.sharpness))
    distance = (positions - positions.t()).float()  # [i, j] = j - i
    kernels = a[..., None, None] * torch.exp(-b.abs()[..., None, None] * (distance - c[..., None, None]) ** 2)
    kernels.sum(1).pow(2).sum().backward()
    for p, reference in zip((scorer.offsets, scorer.amplitudes, scorer.sharpness), (c, a, b)):
        assert reference.grad.abs().min() > 0  # every kernel parameter matters
        torch.testing.assert_close(p.grad, reference.grad)


def _batch(task):
    return random_batch(task.source_dictionary, [3, 7, 5], [6, 2, 4])


def _load_plain_weights(tisa_model, plain_model):
    """Copies a plain Transformer's weights into a TISA model (the same projection names) and zeroes F."""
    missing, unexpected = tisa_model.load_state_dict(plain_model.state_dict(), strict=False)
    assert not unexpected and missing and all(".position_bias." in name for name in missing)
    for module in tisa_model.modules():
        if isinstance(module, TisaScorer):
            module.amplitudes.data.zero_()


@pytest.mark.parametrize("flags", [[], ["--no-token-positional-embeddings"]], ids=["mode_a", "mode_b"])
def test_zero_amplitudes_give_the_plain_transformer(flags):
    plain, task = build_model(flags, seed=3)
    tisa, _ = build_model(TISA + flags, seed=3)
    _load_plain_weights(tisa, plain)
    src, lengths, tgt = _batch(task)
    expected, _ = plain(src, lengths, tgt)
    got, _ = tisa(src, lengths, tgt)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    # ... and step-by-step decoding (TISA's incremental path) too.
    mask = tgt.ne(task.target_dictionary.pad())
    torch.testing.assert_close(decode_incrementally(tisa, src, lengths, tgt)[mask], expected[mask], atol=1e-5,
                               rtol=1e-5)


def test_nonzero_amplitudes_change_the_output():
    plain, task = build_model([], seed=3)
    tisa, _ = build_model(TISA, seed=3)
    _load_plain_weights(tisa, plain)
    for module in tisa.modules():
        if isinstance(module, TisaScorer):
            module.amplitudes.data.fill_(0.5)
    src, lengths, tgt = _batch(task)
    assert (tisa(src, lengths, tgt)[0] - plain(src, lengths, tgt)[0]).abs().max() > 1e-3


def test_cross_site_is_rejected_naming_the_flag():
    with pytest.raises(ValueError, match="--cross-mixer tisa") as err:
        build_model(["--cross-mixer", "tisa"])
    assert "cross" in str(err.value)


def test_negative_kernel_count_is_rejected_naming_the_flag():
    with pytest.raises(ValueError, match="--tisa-kernels -1"):
        build_model(TISA + ["--tisa-kernels", "-1"])


def _encode_permuted(model, task):
    """The encoder output of a permuted sentence, and the permuted encoder output of the sentence."""
    d = task.source_dictionary
    src = torch.tensor([[d.nspecial + i for i in (5, 1, 9, 3, 7)] + [d.eos()]])
    perm = torch.tensor([3, 0, 4, 2, 1, 5])  # EOS stays last
    lengths = torch.tensor([src.size(1)])
    out = model.encoder(src, lengths)["encoder_out"][0]
    return model.encoder(src[:, perm], lengths)["encoder_out"][0], out[perm]


def test_zero_kernels_is_the_host_attention_and_bag_of_words_without_positions():
    model, task = build_model(["--tisa-kernels", "0"], arch="tisa_nope_transformer_tiny")
    assert type(model.encoder.layers[0].self_attn) is MultiheadAttention
    # No position information at all: permuting the source permutes the encoder output.
    out_of_permuted, permuted_out = _encode_permuted(model, task)
    torch.testing.assert_close(out_of_permuted, permuted_out, atol=1e-6, rtol=1e-5)


def test_tisa_without_position_embeddings_is_order_sensitive():
    model, task = build_model([], arch="tisa_nope_transformer_tiny")
    assert isinstance(model.encoder.layers[0].self_attn, TisaAttention)
    assert model.encoder.embed_positions is None
    out_of_permuted, permuted_out = _encode_permuted(model, task)
    assert (out_of_permuted - permuted_out).abs().max() > 1e-4


def test_architectures_set_the_modes():
    a, _ = build_model([], arch="tisa_transformer_tiny")
    b, _ = build_model([], arch="tisa_nope_transformer_tiny")
    assert a.encoder.embed_positions is not None and b.encoder.embed_positions is None
    for model in (a, b):
        assert isinstance(model.decoder.layers[0].self_attn, TisaAttention)
        assert type(model.decoder.layers[0].encoder_attn) is MultiheadAttention


def test_multi_token_incremental_block_is_causal():
    """A prefix fed as one block, then single steps, equals the teacher-forced pass."""
    model, _ = build_model(TISA, seed=5)
    mixer = model.decoder.layers[0].self_attn
    x = torch.randn(4, 2, 16)
    full, _ = mixer(x, x, x)  # no attn_mask given: the mixer is causal by itself
    torch.testing.assert_close(step_mixer(mixer, x, block=3)[0], full, atol=1e-6, rtol=1e-5)  # 3 tokens, then 1
    torch.testing.assert_close(step_mixer(mixer, x)[0], full, atol=1e-6, rtol=1e-5)


def test_encoder_scores_use_real_positions_of_left_padded_sources():
    model, task = build_model(TISA, seed=4)
    d = task.source_dictionary
    sentence = [d.nspecial + i for i in (4, 2, 8)]
    alone, _ = src_batch([sentence], d.pad(), d.eos())
    padded, lengths = src_batch([sentence, sentence + [d.nspecial + 1] * 5], d.pad(), d.eos())
    out_alone = model.encoder(alone, torch.tensor([4]))["encoder_out"][0]
    out_padded = model.encoder(padded, lengths)["encoder_out"][0]
    torch.testing.assert_close(out_padded[-4:, :1], out_alone, atol=1e-6, rtol=1e-5)


def test_shaw_host_takes_the_scorer_as_its_logit_bias():
    shaw, task = build_model(["--encoder-self-mixer", "shaw", "--decoder-self-mixer", "shaw"], seed=6)
    hosted, _ = build_model(["--encoder-self-mixer", "tisa_shaw", "--decoder-self-mixer", "tisa_shaw"], seed=6)
    assert isinstance(hosted.encoder.layers[0].self_attn, ShawRelativeAttention)
    assert isinstance(hosted.decoder.layers[1].self_attn.logit_bias, TisaScorer)
    missing, unexpected = hosted.load_state_dict(shaw.state_dict(), strict=False)
    assert not unexpected and all(".logit_bias." in name for name in missing)
    src, lengths, tgt = _batch(task)
    with torch.no_grad():
        expected = shaw(src, lengths, tgt)[0]
        assert (hosted(src, lengths, tgt)[0] - expected).abs().max() > 1e-3
        for module in hosted.modules():
            if isinstance(module, TisaScorer):
                module.amplitudes.zero_()
        torch.testing.assert_close(hosted(src, lengths, tgt)[0], expected, atol=1e-6, rtol=1e-5)


def test_shaw_host_with_zero_kernels_has_no_bias():
    model, _ = build_model(["--encoder-self-mixer", "tisa_shaw", "--tisa-kernels", "0"])
    assert model.encoder.layers[0].self_attn.logit_bias is None


def _old_layout(model):
    """The model's state dict as TISA wrote it when it wrapped fairseq's MultiheadAttention."""
    hosts = [f"{name}." for name, module in model.named_modules() if isinstance(module, TisaAttention)]
    old = {}
    for name, value in model.state_dict().items():
        host = next((h for h in hosts if name.startswith(h)), None)
        if host is not None:
            rest = name[len(host):]
            scorer = rest.removeprefix("position_bias.")
            name = host + (f"tisa.{scorer}" if scorer != rest else f"attention.{rest}")
        old[name] = value
    return old


def test_checkpoints_of_the_multihead_attention_wrapper_still_load():
    """Keys ``self_attn.attention.*_proj`` and ``self_attn.tisa.*`` load into content attention, same outputs."""
    flags = ["--encoder-self-mixer", "tisa", "--decoder-self-mixer", "tisa,mha"]
    model, task = build_model(flags, seed=8)
    state = _old_layout(model)
    assert "decoder.layers.0.self_attn.attention.q_proj.weight" in state
    assert "decoder.layers.0.self_attn.tisa.offsets" in state
    assert "decoder.layers.1.self_attn.q_proj.weight" in state  # the mha layer keeps its names
    loaded, _ = build_model(flags, seed=9)
    loaded.load_state_dict(state)  # strict: no key left over or missing
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    src, lengths, tgt = _batch(task)
    with torch.no_grad():
        assert torch.equal(loaded(src, lengths, tgt)[0], model(src, lengths, tgt)[0])


def test_the_committed_fixture_has_the_old_layout_and_loads_unchanged():
    """The regression fixture (written by the MultiheadAttention wrapper) holds exactly the old keys."""
    checkpoint = os.path.join(REGRESSION, "tisa", "checkpoint.pt")
    saved = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)["model"]
    [model], _ = checkpoint_utils.load_model_ensemble([checkpoint],
                                                      arg_overrides={"data": os.path.join(REGRESSION, "data-bin")})
    assert isinstance(model.encoder.layers[0].self_attn, TisaAttention)
    old = _old_layout(model)
    assert old.keys() == saved.keys()
    for name, value in saved.items():
        assert torch.equal(old[name], value), name


def test_scores_and_their_gradients_stay_fp32_under_autocast():
    # The kernel sum is a matrix product (KernelSum), which autocast would run in bf16.
    torch.manual_seed(0)
    scorer = TisaScorer(2, 3)
    distances = torch.arange(-40, 41)
    plain = scorer.profile(distances)
    plain.sum().backward()
    expected = [p.grad.clone() for p in scorer.parameters()]
    scorer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = scorer.profile(distances)
    assert scores.dtype == torch.float32
    torch.testing.assert_close(scores, plain)
    scores.sum().backward()
    for p, reference in zip(scorer.parameters(), expected):
        torch.testing.assert_close(p.grad, reference)


def tisa_training_step(model, batch):
    """The loss's output and the gradients of every parameter after one forward and backward."""
    model.zero_grad()
    src, lengths, prev = batch
    out = model(src, lengths, prev)[0]
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("heads", [[], ["--encoder-attention-heads", "4", "--decoder-attention-heads", "2"]],
                         ids=["same_heads", "heads_per_side"])
def test_the_layers_of_a_call_compute_their_scores_at_once_with_the_same_outputs_and_gradients(monkeypatch, heads):
    """Issue 48: a teacher-forced call evaluates every layer's kernel sum in one KernelSum per side, and masks
    every layer's bias in one MaskedBias (their operators, each a kernel launch on a GPU, once per side, not per
    layer); outputs and every gradient are those of each layer's own evaluation. KernelSum stacks its layers'
    H x S parameters, so a side's layers must share their shape: fairseq's heads are set per side."""
    from posnet_fairseq.mixers.distance_bias import DistanceBias

    torch.manual_seed(0)
    model, task = build_model(["--dropout", "0", *heads], arch="tisa_transformer_tiny")
    batch = random_batch(task.source_dictionary, [7, 4], [6, 3])
    scorers = [m for m in model.modules() if isinstance(m, TisaScorer)]
    assert len(scorers) == 4 and all(len(s.layers) == 2 for s in scorers)  # two layers per side
    assert len({s.num_heads for s in scorers}) == (2 if heads else 1)
    with torch.profiler.profile() as profiler:
        out, grads = tisa_training_step(model, batch)
    exps = [e for e in profiler.events() if e.name == "aten::exp"]
    assert len(exps) == 2, len(exps)  # one per side
    maskings = [e for e in profiler.events() if e.name == "MaskedBias"]
    assert len(maskings) == 2, len(maskings)  # one per side: every layer's mask at once
    monkeypatch.setattr(TisaScorer, "on_grid", DistanceBias.on_grid)  # each layer its own
    monkeypatch.setattr(TisaScorer, "masked_on_grid", DistanceBias.masked_on_grid)
    with torch.profiler.profile() as profiler:
        each_out, each_grads = tisa_training_step(model, batch)
    assert len([e for e in profiler.events() if e.name == "MaskedBias"]) == 4  # one per layer
    torch.testing.assert_close(out, each_out)
    assert grads.keys() == each_grads.keys() and any("sharpness" in name for name in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, each_grads[name])


def test_the_layers_parameters_are_stacked_inside_the_kernel_sum_and_their_gradients_keep_their_dtype():
    """Issue 48: stacking (and casting) the layers' parameters outside KernelSum recorded an autograd node per
    stack and per cast, host time of every training step; inside it, the parameters are its own inputs, and a
    half-precision scorer gets its gradient in its own dtype, that of the fp32 evaluation."""
    torch.manual_seed(0)
    halves = [TisaScorer(2, 3).half() for _ in range(3)]
    scorers = [copy.deepcopy(half).float() for half in halves]  # the same values in fp32
    distances = torch.arange(-5, 6)
    weights = torch.linspace(-1, 1, 3 * 2 * distances.numel()).view(6, -1)
    scores = kernel_sums(scorers, distances)
    assert all(type(node).__name__ == "AccumulateGrad" for node, _ in scores.grad_fn.next_functions[1:])
    (scores * weights).sum().backward()
    (kernel_sums(halves, distances) * weights).sum().backward()
    for scorer, half in zip(scorers, halves):
        for p, h in zip(scorer.parameters(), half.parameters()):
            assert h.grad.dtype == torch.float16
            torch.testing.assert_close(h.grad, p.grad.half(), atol=0, rtol=0)


def test_a_scorers_parameters_are_c_a_and_b_in_turn_as_a_runs_optimizer_state_holds_them():
    """A run's optimizer state (checkpoint_last.pt) holds one entry per parameter, in the model's order: a
    scorer's parameters are its offsets, amplitudes and sharpness, each H x S, as they always were (a run resumes:
    tests/test_resume_exact.py)."""
    scorer = TisaScorer(2, 3)
    assert [(name, tuple(p.shape)) for name, p in scorer.named_parameters()] == [
        ("offsets", (2, 3)), ("amplitudes", (2, 3)), ("sharpness", (2, 3))]


def test_the_kernel_sums_gradient_passes_gradcheck():
    """KernelSum's written-out gradient, for two layers at once, against finite differences in fp64."""
    torch.manual_seed(0)
    kernels = [p.detach().requires_grad_() for _ in range(2) for p in TisaScorer(2, 3).double().parameters()]
    distances = torch.arange(-6, 7, dtype=torch.float64)
    assert kernel_sums([TisaScorer(2, 3).double()], distances).dtype == torch.float64
    assert torch.autograd.gradcheck(lambda *k: KernelSum.apply(distances, *k), kernels)
