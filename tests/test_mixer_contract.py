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

from fairseq_testing import (
    build_model,
    check_beam_reordering,
    check_finite_at_longest_length,
    check_incremental_equals_teacher_forced,
    check_padding_invariance,
    copy_as,
)
from posnet_fairseq.mixers.base import MIXERS, SITE_FLAGS

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
    return build_model([SITE_FLAGS[site], name, *flags])


@pytest.fixture(params=CASES, ids=CASE_IDS)
def case(request):
    name, site, variant, _ = request.param
    model, task = _model(name, site, variant)
    return model, task.source_dictionary, site


def test_registry_has_mha_at_every_site():
    assert MIXERS["mha"].sites == frozenset(SITE_FLAGS)


def test_padding_invariance(case):
    model, d, _ = case
    check_padding_invariance(model, d, ATOL)


def test_incremental_equals_teacher_forced(case):
    model, d, _ = case
    check_incremental_equals_teacher_forced(model, d, ATOL)


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
