"""The mixer contract, checked for every registered mixer, at every site it
claims, for its default options and each of its registered ``variants``.

A mixer is exercised inside a tiny ``posnet_transformer`` (the other sites
``mha``), the way fairseq uses it: left-padded sources, right-padded targets,
SequenceGenerator-style incremental decoding with beam reordering. A new mixer
is covered as soon as it is registered.
"""
import functools

import pytest
import torch
from fairseq.modules import MultiheadAttention

from fairseq_testing import (
    build_model, decode_incrementally, decode_steps, random_batch, random_sentences, src_batch, step_mixer, tgt_batch,
)
from posnet_fairseq.mixers.base import MIXERS
from posnet_fairseq.mixers.gating import GatedMixer
from posnet_fairseq.mixers.shaw import ShawRelativeAttention
from posnet_fairseq.sites import SITE, SITES

ATOL = 1e-5


def variant_flags(options):
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False:
            flags += [flag, str(value)]
    return flags


CASES = [
    (name, site, variant, variant_flags(options))
    for name, entry in sorted(MIXERS.items())
    for site in sorted(entry.sites)
    for variant, options in [("default", {})] + sorted(entry.variants.items())
]
CASE_IDS = [f"{name}-{site}-{variant}" for name, site, variant, _ in CASES]


@functools.lru_cache(maxsize=None)
def _model(name, site, variant):
    flags = next(f for n, s, v, f in CASES if (n, s, v) == (name, site, variant))
    if MIXERS[name].uses_length_ratio:
        flags = flags + ["--length-ratio", "1.5"]  # gamma != 1 exercises the position mapping
    return build_model([SITE[site].mixer_flag, name, *flags])


@pytest.fixture(params=CASES, ids=CASE_IDS)
def case(request):
    name, site, variant, _ = request.param
    model, task = _model(name, site, variant)
    return model, task.source_dictionary, site


def _expected_class(name, site, variant):
    """The class a case's site holds: the registered class, except where the
    mixer builds another module on purpose."""
    if name in ("mha", "learned_cross") or (name, variant) == ("tisa", "s0"):
        return MultiheadAttention  # fairseq's attention (learned_cross: fewer heads; TISA without kernels)
    if name == "tisa_shaw":
        return ShawRelativeAttention  # Shaw's attention with TISA's scorer as its logit bias
    if (name, site) == ("none", "cross"):
        return type(None)  # no cross-attention sub-layer at all
    return MIXERS[name].build.__self__


def _site_modules(model, site):
    """The module at ``site`` in every layer, unwrapped from the PosNet gating."""
    layers = model.encoder.layers if SITE[site].side == "encoder" else model.decoder.layers
    modules = [layer.encoder_attn if site == "cross" else layer.self_attn for layer in layers]
    return [m.mixer if isinstance(m, GatedMixer) else m for m in modules]


@pytest.mark.parametrize("name,site,variant,flags", CASES, ids=CASE_IDS)
def test_case_model_has_the_mixer_at_its_site_and_mha_elsewhere(name, site, variant, flags):
    """The checks below exercise the mixer they are named after, not mha."""
    model, _ = _model(name, site, variant)
    expected = _expected_class(name, site, variant)
    assert all(type(m) is expected for m in _site_modules(model, site)), [type(m) for m in _site_modules(model, site)]
    for other in set(SITES) - {site}:
        assert all(type(m) is MultiheadAttention for m in _site_modules(model, other)), other


def test_padding_invariance(case):
    """A sentence gives the same encoder states and logits alone as beside longer ones."""
    model, d, _ = case
    g = torch.Generator().manual_seed(0)
    srcs, tgts = random_sentences([5, 11, 3], g, d), random_sentences([4, 9, 2], g, d)
    tokens, lengths = src_batch(srcs, d.pad(), d.eos())
    with torch.no_grad():
        enc = model.encoder(tokens, lengths)["encoder_out"][0]
        batched = model(tokens, lengths, tgt_batch(tgts, d.pad(), d.eos()))[0]
        for i, (src, tgt) in enumerate(zip(srcs, tgts)):
            one_tokens, one_lengths = src_batch([src], d.pad(), d.eos())
            one_enc = model.encoder(one_tokens, one_lengths)["encoder_out"][0]
            alone = model(one_tokens, one_lengths, tgt_batch([tgt], d.pad(), d.eos()))[0]
            n = len(src) + 1  # real source tokens sit at the right end (left padding)
            torch.testing.assert_close(enc[-n:, i], one_enc[:, 0], atol=ATOL, rtol=0)
            torch.testing.assert_close(batched[i, : len(tgt) + 1], alone[0], atol=ATOL, rtol=0)


def test_incremental_equals_teacher_forced(case):
    model, d, _ = case
    tokens, lengths, prev = random_batch(d, [6, 10, 4], [9, 9, 9], seed=1)
    with torch.no_grad():
        full = model(tokens, lengths, prev)[0]
    torch.testing.assert_close(decode_incrementally(model, tokens, lengths, prev), full, atol=ATOL, rtol=0)


def test_beam_reordering(case):
    """Reorders as SequenceGenerator does: permutations within a sentence's beams,
    then finished sentences dropped; incremental logits follow the reordered
    histories exactly."""
    model, d, _ = case
    g = torch.Generator().manual_seed(2)
    bsz, beam = 2, 2
    tokens, lengths = src_batch(random_sentences([7, 4], g, d), d.pad(), d.eos())
    beams = torch.arange(bsz).repeat_interleave(beam)
    prev = torch.cat([torch.full((bsz * beam, 1), d.eos()),
                      torch.randint(d.nspecial, len(d), (bsz * beam, 8), generator=g)], dim=1)
    reorders = {3: torch.tensor([1, 0, 3, 2]), 4: torch.tensor([1, 1, 2, 3]), 6: torch.tensor([2, 3])}
    steps = decode_steps(model, tokens[beams], lengths[beams], prev, reorders)
    assert [step.logits.size(0) for step in steps] == [4] * 6 + [2] * 3
    for t, step in enumerate(steps):
        with torch.no_grad():
            reference = model.decoder(step.prefix, encoder_out=step.encoder_out)[0][:, -1]
        torch.testing.assert_close(step.logits, reference, atol=ATOL, rtol=0, msg=lambda m: f"step {t}: {m}")


def _cpu_supports(dtype):
    try:
        x = torch.ones(4, 4, dtype=dtype)
        torch.nn.functional.layer_norm(torch.nn.functional.linear(x, x), (4,)).softmax(-1)
        return True
    except RuntimeError:
        return False


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_numerics_at_longest_length(case, dtype):
    """No NaN/inf at the longest length the model accepts: the whole model
    teacher-forced, and a decoder mixer alone step by step up to that length."""
    if not _cpu_supports(dtype):
        pytest.skip(f"this CPU build of torch has no {dtype} kernels")
    model, d, site = case
    model = _copy_as(model, dtype)
    max_src, max_tgt = (min(n, 1024) for n in model.max_positions())
    # Only the sides the mixer sees need the longest length.
    max_src = max_src if site != "decoder_self" else 8
    max_tgt = max_tgt if site != "encoder_self" else 8
    tokens, lengths, prev = random_batch(d, [max_src - 1, 5], [max_tgt - 1, 7], seed=3)
    with torch.no_grad():
        logits = model(tokens, lengths, prev)[0]
        assert torch.isfinite(logits).all(), f"non-finite logits in {dtype}"
        if site == "decoder_self":
            # Stepping the whole decoder 1024 times is slow; the mixer alone is
            # where step-dependent overflow would happen. fp32 steps to the
            # longest length (exp overflows fp32 and bf16 near step 887);
            # bf16/fp16 step past fp16's overflow point (111) but not to 1024,
            # where reduced-precision CPU kernels would take minutes.
            steps = max_tgt if dtype == torch.float32 else min(max_tgt, 160)
            mixer = model.decoder.layers[0].self_attn
            x = torch.randn(steps, 2, mixer.embed_dim, generator=torch.Generator().manual_seed(4)).to(dtype)
            finite = torch.isfinite(step_mixer(mixer, x)[0]).flatten(1).all(1)
            assert finite.all(), f"non-finite mixer output from step {int((~finite).nonzero()[0])} in {dtype}"


def _copy_as(model, dtype):
    import copy

    clone = copy.deepcopy(model).to(dtype)
    # deepcopy copies each module's incremental-state id; fresh ids keep the clone's
    # decoding state apart from the original's.
    for module in clone.modules():
        if hasattr(module, "init_incremental_state"):
            module.init_incremental_state()
    return clone
