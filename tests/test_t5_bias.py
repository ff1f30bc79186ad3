"""T5's relative position bias (mixers/t5_bias.py) against Raffel et al. (2020), section 2.1, and the
bucketing of the authors' code, re-derived here one distance at a time in float32 as that code computes it."""
import math

import numpy as np
import pytest
import torch

from fairseq_testing import build_model
from posnet_fairseq.mixers.t5_bias import T5Bias, t5_buckets


def reference_bucket(relative, bidirectional, num_buckets, max_distance):
    """The bucket of key - query distance ``relative``: exact below half a half, log-spaced up to max_distance."""
    n = -relative
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            bucket += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    # float32 arithmetic, step by step, as the reference implementations (TensorFlow / PyTorch) do it
    ratio = np.float32(np.log(np.float32(n) / np.float32(max_exact)))
    scaled = ratio / np.float32(math.log(max_distance / max_exact)) * np.float32(num_buckets - max_exact)
    return bucket + min(max_exact + int(scaled), num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 6), (64, 256), (16, 40)])
def test_buckets_equal_the_reference(bidirectional, num_buckets, max_distance):
    distances = torch.arange(-600, 601)
    ours = t5_buckets(distances, bidirectional, num_buckets, max_distance)
    expected = [reference_bucket(r, bidirectional, num_buckets, max_distance) for r in distances.tolist()]
    assert ours.tolist() == expected


def test_bucket_boundaries_of_the_default():
    """32 buckets, max distance 128 (T5): bidirectional, 16 per direction, 0..7 exact, then log-spaced."""
    b = t5_buckets(torch.arange(-200, 201), True, 32, 128).tolist()
    at = {r: b[r + 200] for r in range(-200, 201)}
    assert [at[-n] for n in range(8)] == list(range(8))  # keys before the query: i - j = n
    assert [at[n] for n in range(1, 8)] == list(range(17, 24))  # keys after the query: second half
    assert at[0] == 0
    # Log-spaced: each bucket covers more distances than the one before, up to 128.
    past = [at[-n] for n in range(8, 200)]
    widths = [past.count(k) for k in range(8, 16)]
    assert widths == sorted(widths) and widths[0] < widths[-2]
    assert at[-127] == 15 and at[-128] == 15 and at[-199] == 15  # >= 128 (and the last bucket's range) share
    assert at[-126] < 15 or at[-127] == at[-126]
    first_of = {k: next(n for n in range(8, 200) if at[-n] == k) for k in range(8, 16)}
    expected_first = {k: min(n for n in range(8, 200) if reference_bucket(-n, True, 32, 128) == k)
                      for k in range(8, 16)}
    assert first_of == expected_first
    # Causal: all 32 buckets for the past, 0..15 exact, the future is bucket 0 (masked anyway).
    c = t5_buckets(torch.arange(-200, 201), False, 32, 128).tolist()
    assert [c[200 - n] for n in range(16)] == list(range(16))
    assert c[200 + 5] == 0 and c[200 - 128] == 31 and c[200 - 127] <= 31


def test_bias_is_the_table_entry_of_each_bucket():
    torch.manual_seed(0)
    bias = T5Bias(num_heads=3, num_buckets=8, max_distance=6, bidirectional=True, embed_dim=16)
    positions = torch.arange(10).unsqueeze(0)
    table = bias(positions, positions)
    w = bias.table.weight
    worst = max(abs(table[0, h, i, j].item() - w[reference_bucket(j - i, True, 8, 6), h].item())
                for h in range(3) for i in range(10) for j in range(10))
    assert worst <= 1e-6


def test_encoder_is_bidirectional_and_decoder_causal():
    model, _ = build_model(arch="t5bias_transformer_tiny")
    assert model.encoder.layers[0].self_attn.position_bias.bidirectional
    assert not model.decoder.layers[0].self_attn.position_bias.bidirectional


@pytest.mark.parametrize("flags,message", [
    (["--t5-bias-buckets", "5"], "--t5-bias-buckets 5: must be an even integer >= 4"),
    (["--t5-bias-buckets", "2"], "--t5-bias-buckets 2: must be an even integer >= 4"),
    (["--t5-bias-buckets", "8", "--t5-bias-max-distance", "4"], "--t5-bias-max-distance 4: must exceed"),
])
def test_bad_settings_are_refused_naming_the_flag(flags, message):
    with pytest.raises(ValueError, match=message):
        build_model(["--encoder-self-mixer", "t5_bias", *flags])
