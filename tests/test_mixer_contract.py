"""The mixer contract, checked for every registered mixer, at every site it
claims, for its default options and each of its registered ``variants``.

A mixer is exercised inside a tiny ``posnet_transformer`` (the other sites
``mha``), the way fairseq uses it: left-padded sources, right-padded targets,
SequenceGenerator-style incremental decoding with beam reordering. A new mixer
is covered as soon as it is registered.
"""
import dataclasses
import functools

import pytest
import torch
from fairseq.modules import MultiheadAttention

from fairseq_testing import (
    build_model, check_beam_reordering, check_finite_at_longest_length, check_incremental_equals_teacher_forced,
    check_padding_invariance, copy_as,
)
from posnet_fairseq.mixers.gating import GatedMixer
from posnet_fairseq.models import int8
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.sites import SITE, SITES

ATOL = 1e-5
# int8 decoding (models/int8.py): torch's dynamic quantisation picks each call's activation scale from the
# rows of that call, so a teacher-forced call (every position at once) and a decoding step (one position)
# round differently. On these tiny models (logits up to about 4.5) incremental and teacher-forced logits
# differ by at most 0.21 (every case, measured with a weight scale per row; 0.17 with one per matrix);
# a decoding-state error shows as differences of order 1.
INT8_ATOL = 0.25


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
def _case(name, site, variant):
    """The case's model and task, and the modules the mixer's registered ``build`` returned for it."""
    flags = next(f for n, s, v, f in CASES if (n, s, v) == (name, site, variant))
    if MIXERS[name].uses_length_ratio:
        flags = flags + ["--length-ratio", "1.5"]  # gamma != 1 exercises the position mapping
    entry, built = MIXERS[name], []

    def recording_build(ctx):
        module = entry.build(ctx)
        if ctx.site is SITE[site]:  # mha also serves the other sites
            built.append(module)
        return module

    MIXERS[name] = dataclasses.replace(entry, build=recording_build)
    try:
        model, task = build_model([SITE[site].mixer_flag, name, *flags])
    finally:
        MIXERS[name] = entry
    return model, task, tuple(built)


def _model(name, site, variant):
    """The case's model and task (tests/test_cuda.py runs the same cases)."""
    return _case(name, site, variant)[:2]


@pytest.fixture(params=CASES, ids=CASE_IDS)
def case(request):
    name, site, variant, _ = request.param
    model, task = _model(name, site, variant)
    return model, task.source_dictionary, site


def _site_modules(model, site):
    """The module at ``site`` in every layer (None: no such sub-layer), unwrapped from the PosNet gating."""
    layers = model.encoder.layers if site.side == "encoder" else model.decoder.layers
    modules = [layer.encoder_attn if site.cross else layer.self_attn for layer in layers]
    return [m.mixer if isinstance(m, GatedMixer) else m for m in modules]


@pytest.mark.parametrize("name,site,variant,flags", CASES, ids=CASE_IDS)
def test_case_model_has_the_mixer_at_its_site_and_mha_elsewhere(name, site, variant, flags):
    """The checks below exercise the mixer they are named after, not mha: every layer's module at the
    site is the one the mixer's build returned for it (a mixer that builds nothing, ``none`` at the cross
    site, leaves the layers without that sub-layer)."""
    model, _, built = _case(name, site, variant)
    modules = _site_modules(model, SITE[site])
    if built:
        assert len(modules) == len(built) and all(m is b for m, b in zip(modules, built)), (modules, built)
    else:
        assert all(m is None for m in modules), modules
    for other in set(SITES) - {site}:
        assert all(type(m) is MultiheadAttention for m in _site_modules(model, SITE[other])), other


def test_padding_invariance(case):
    model, d, _ = case
    check_padding_invariance(model, d, ATOL)


def test_incremental_equals_teacher_forced(case):
    model, d, _ = case
    check_incremental_equals_teacher_forced(model, d, ATOL)


def test_int8_incremental_equals_teacher_forced(case):
    """The same check with the model's linear layers int8 (posnet-quantize), within :data:`INT8_ATOL`. Every
    linear layer of the site's sub-layers is quantised but those a module keeps in fp32 (``FP32_LINEARS``)."""
    model, d, site = case
    quantized = int8.quantize_(copy_as(model), "all")
    side = SITE[site].side
    for name, sub in getattr(quantized, side).named_modules():
        if not name.endswith("encoder_attn" if SITE[site].cross else "self_attn"):
            continue
        kept = {f"{n}.{c}".lstrip(".") for n, m in sub.named_modules() for c in getattr(m, "FP32_LINEARS", ())}
        left = [n for n, m in sub.named_modules() if type(m) is torch.nn.Linear]
        assert all(any(n == k or n.startswith(k + ".") for k in kept) for n in left), (name, left)
    check_incremental_equals_teacher_forced(quantized, d, INT8_ATOL)


def test_beam_reordering(case):
    model, d, _ = case
    check_beam_reordering(model, d, ATOL)


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
    # fp32 steps to the longest length (exp overflows fp32 and bf16 near step
    # 887); bf16/fp16 step past fp16's overflow point (111) but not to 1024,
    # where reduced-precision CPU kernels would take minutes.
    check_finite_at_longest_length(copy_as(model, dtype), d, site,
                                   decoder_steps=None if dtype == torch.float32 else 160)
