"""FourierNet (mixers/fouriernet.py, a PosNet paper baseline) beyond the mixer contract: the formula
against the complex DFT, exact angles on long sentences, its parameter count at base size (paper
Table 2) and the encoder-only site."""
import math

import pytest
import torch

from fairseq_testing import build_model, padded_batch
from posnet_fairseq.mixers.fouriernet import FourierNetMixer

D, H = 8, 2


def test_fouriernet_equals_complex_dft():
    # Seeded: the fp32 angles' error scales with the weights and inputs, so a
    # fixed atol holds for fixed data, not for whatever the RNG holds when the
    # worker reaches this test (unseeded, one full-suite run saw 1.05e-6).
    torch.manual_seed(0)
    mixer = FourierNetMixer(D, H).double().eval()
    lengths = [9, 2, 6, 1]
    x, mask = padded_batch(lengths, left=True, dim=D)
    with torch.no_grad():
        out = mixer(x, x, x, key_padding_mask=mask)[0]
        v = mixer.v_proj(x)
        for b, L in enumerate(lengths):
            cols = [t for t in range(x.size(0)) if not mask[b, t]]
            n = torch.arange(L, dtype=torch.float64)
            dft = torch.exp(-2j * math.pi * torch.outer(n, n) / L) / math.sqrt(L)
            expected = mixer.out_proj((dft @ v[cols, b].to(torch.complex128)).real)
            # fp32 angles and cosines, then fp64 from there on.
            torch.testing.assert_close(out[cols, b], expected, rtol=0, atol=1e-6)


def test_fouriernet_long_sentence_angles_are_exact():
    """(n m) mod L in integers: at L = 1000 the row of n = 999 is still cos(2 pi m (L-1) / L)."""
    L = 1000
    mixer = FourierNetMixer(D, H).eval()
    with torch.no_grad():
        x = torch.randn(L, 1, D)
        weights = mixer(x, x, x, need_weights=True)[1][0]
    m = torch.arange(L, dtype=torch.float64)
    expected = torch.cos(2 * math.pi * ((999 * m) % L) / L) / math.sqrt(L)
    torch.testing.assert_close(weights[999].double(), expected, rtol=0, atol=1e-7)


def test_parameter_count_at_base():
    """Table 2 arithmetic: FourierNet drops W_Q and W_K in every encoder layer."""
    d, layers = 512, 6
    counts = {arch: sum(p.numel() for p in build_model(arch=arch, dims=())[0].parameters())
              for arch in ("posnet_transformer_base", "fouriernet_transformer_base")}
    assert counts["fouriernet_transformer_base"] - counts["posnet_transformer_base"] == -layers * 2 * (d * d + d)


@pytest.mark.parametrize("flag", ["--decoder-self-mixer", "--cross-mixer"])
def test_fouriernet_is_encoder_only(flag):
    with pytest.raises(ValueError, match=f"{flag} fouriernet: .*cannot serve"):
        build_model([flag, "fouriernet"])
