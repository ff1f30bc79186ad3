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

from fairseq_testing import build_model, random_sentences, src_batch, tgt_batch
from posnet_fairseq.mixers.base import MIXERS
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


def test_registry_has_mha_at_every_site():
    assert MIXERS["mha"].sites == frozenset(SITES)


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
    g = torch.Generator().manual_seed(1)
    tokens, lengths = src_batch(random_sentences([6, 10, 4], g, d), d.pad(), d.eos())
    prev = tgt_batch(random_sentences([9, 9, 9], g, d), d.pad(), d.eos())
    state = {}
    with torch.no_grad():
        enc = model.encoder(tokens, lengths)
        full = model.decoder(prev, encoder_out=enc)[0]
        for t in range(prev.size(1)):
            step = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0]
            assert step.size(1) == 1
            torch.testing.assert_close(step[:, 0], full[:, t], atol=ATOL, rtol=0)


def test_beam_reordering(case):
    """Reorders as SequenceGenerator does: permutations within a sentence's beams,
    then finished sentences dropped; incremental logits follow the reordered
    histories exactly."""
    model, d, _ = case
    g = torch.Generator().manual_seed(2)
    bsz, beam = 2, 2
    tokens, lengths = src_batch(random_sentences([7, 4], g, d), d.pad(), d.eos())
    reorders = {3: torch.tensor([1, 0, 3, 2]), 4: torch.tensor([1, 1, 2, 3]), 6: torch.tensor([2, 3])}
    with torch.no_grad():
        enc = model.encoder(tokens, lengths)
        enc = model.encoder.reorder_encoder_out(enc, torch.arange(bsz).repeat_interleave(beam))
        history = torch.full((bsz * beam, 1), d.eos(), dtype=torch.long)
        state = {}
        for step in range(9):
            if step in reorders:
                order = reorders[step]
                model.decoder.reorder_incremental_state_scripting(state, order)
                enc = model.encoder.reorder_encoder_out(enc, order)
                history = history[order]
            incremental = model.decoder(history, encoder_out=enc, incremental_state=state)[0][:, -1]
            reference = model.decoder(history, encoder_out=enc)[0][:, -1]
            torch.testing.assert_close(incremental, reference, atol=ATOL, rtol=0)
            nxt = torch.randint(d.nspecial, len(d), (history.size(0), 1), generator=g)
            history = torch.cat([history, nxt], dim=1)


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
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        tokens, lengths = src_batch(random_sentences([max_src - 1, 5], g, d), d.pad(), d.eos())
        prev = tgt_batch(random_sentences([max_tgt - 1, 7], g, d), d.pad(), d.eos())
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
            x = torch.randn(steps, 2, mixer.embed_dim, generator=g).to(dtype)
            state = {}
            for t in range(steps):
                out = mixer(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0]
                assert torch.isfinite(out).all(), f"non-finite mixer output at step {t} in {dtype}"


def _copy_as(model, dtype):
    import copy

    clone = copy.deepcopy(model).to(dtype)
    # deepcopy copies each module's incremental-state id; fresh ids keep the clone's
    # decoding state apart from the original's.
    for module in clone.modules():
        if hasattr(module, "init_incremental_state"):
            module.init_incremental_state()
    return clone
