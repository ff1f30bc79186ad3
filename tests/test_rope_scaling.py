"""RoPE scaling at inference (mixers/rope_scaling.py): each method's frequencies re-derived from its paper,
decoding exact with them, and the flags given to a trained checkpoint at generation time."""
import math
import os

import pytest
import torch
from fairseq import checkpoint_utils

from fairseq_testing import (build_model, check_beam_reordering, check_incremental_equals_teacher_forced,
                             check_padding_invariance, decode_incrementally, random_batch, train_and_generate,
                             write_synthetic_data_bin)
from posnet_fairseq.mixers.rope import Rotary
from posnet_fairseq.mixers.rope_scaling import RopeScaling

D = 16


def rope_theta(d, base=10000.0):
    return [base ** (-2 * i / d) for i in range(d // 2)]


def rotated(rotary, x, m):
    return rotary(x, torch.tensor([[m]]))[0, 0, 0].double()


def expected_rotation(x, m, thetas, magnitude=1.0):
    """Pair i of x turned by the angle m theta_i, times the magnitude, written out per pair."""
    out = torch.zeros(len(x), dtype=torch.float64)
    for i, theta in enumerate(thetas):
        c, s = math.cos(m * theta), math.sin(m * theta)
        a, b = x[2 * i].item(), x[2 * i + 1].item()
        out[2 * i], out[2 * i + 1] = magnitude * (c * a - s * b), magnitude * (s * a + c * b)
    return out


def yarn_theta(d, s, length, alpha=1.0, beta=32.0, base=10000.0):
    """YaRN section 3: r = L / lambda, lambda = 2 pi / theta; gamma ramps from 0 (r < alpha) to 1 (r > beta)."""
    thetas = []
    for theta in rope_theta(d, base):
        r = length / (2 * math.pi / theta)
        gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
        thetas.append((1 - gamma) * theta / s + gamma * theta)
    return thetas


@pytest.mark.parametrize("method,s,thetas,magnitude", [
    ("none", 1.0, rope_theta(D), 1.0),
    ("linear", 4.0, [t / 4 for t in rope_theta(D)], 1.0),  # position interpolation: m -> m / s
    ("ntk", 4.0, rope_theta(D, 10000.0 * 4.0 ** (D / (D - 2))), 1.0),  # the base times s^(d/(d-2))
    ("yarn", 4.0, yarn_theta(D, 4.0, 64), 0.1 * math.log(4.0) + 1),
    ("yarn", 2.5, yarn_theta(D, 2.5, 200, alpha=2.0, beta=16.0), 0.1 * math.log(2.5) + 1),
])
def test_each_method_is_its_formula(method, s, thetas, magnitude):
    torch.manual_seed(0)
    length = 200 if s == 2.5 else 64
    alpha, beta = (2.0, 16.0) if s == 2.5 else (1.0, 32.0)
    rotary = Rotary(D, scaling=RopeScaling(method, s, length if method == "yarn" else None, alpha, beta))
    x = torch.randn(1, 1, 1, D)
    worst = max((rotated(rotary, x, m) - expected_rotation(x[0, 0, 0], m, thetas, magnitude)).abs().max().item()
                for m in (0, 1, 7, 63, 250, 1000))
    assert worst <= 1e-4, worst


def test_the_methods_keep_what_they_promise():
    theta = torch.tensor(rope_theta(D))
    ntk = RopeScaling("ntk", 8.0).frequencies(theta, 10000.0, D)
    assert ntk[0].item() == pytest.approx(theta[0].item())  # the fastest pair is kept
    assert ntk[-1].item() == pytest.approx(theta[-1].item() / 8, rel=1e-5)  # the slowest is divided by s
    yarn = RopeScaling("yarn", 8.0, 1000).frequencies(theta, 10000.0, D)
    turns = 1000 * theta / (2 * math.pi)
    assert torch.equal(yarn[turns > 32], theta[turns > 32]) and (turns > 32).any()
    assert torch.allclose(yarn[turns < 1], theta[turns < 1] / 8) and (turns < 1).any()


def test_scaling_flags_errors_name_the_flags():
    with pytest.raises(ValueError, match="--rope-scaling yarn: needs --rope-scaling-train-length"):
        build_model(["--encoder-self-mixer", "rope", "--rope-scaling", "yarn", "--rope-scaling-factor", "2"])
    with pytest.raises(ValueError, match="--rope-scaling-factor 2: has no effect with --rope-scaling none"):
        build_model(["--encoder-self-mixer", "rope", "--rope-scaling-factor", "2"])
    with pytest.raises(ValueError, match="--rope-scaling-factor 0.5: must be >= 1"):
        build_model(["--encoder-self-mixer", "rope", "--rope-scaling", "linear", "--rope-scaling-factor", "0.5"])


@pytest.mark.parametrize("method", ["linear", "ntk", "yarn"])
def test_scaled_model_decodes_as_it_trains(method):
    model, task = build_model(["--rope-scaling", method, "--rope-scaling-factor", "3",
                               "--rope-scaling-train-length", "4"], arch="rope_transformer_tiny")
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], [9, 3])
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
    assert torch.allclose(decode_incrementally(model, src, lengths, prev)[0], out[0], atol=1e-5)


def test_a_trained_checkpoint_takes_the_scaling_at_generation(tmp_path):
    """--model-overrides gives the flags to a model trained without them; the same weights, new frequencies."""
    data_bin = write_synthetic_data_bin(str(tmp_path / "data"), train=40, valid=5, test=5)
    checkpoint, _ = train_and_generate(data_bin, str(tmp_path / "ckpt"), "rope_transformer_tiny", updates=1)
    overrides = {"rope_scaling": "yarn", "rope_scaling_factor": 2.0, "rope_scaling_train_length": 20,
                 "data": data_bin}
    (plain,), _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={"data": data_bin})
    (scaled,), _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides=overrides)
    rotary = scaled.decoder.layers[0].self_attn.transform
    assert rotary.scaling == RopeScaling("yarn", 2.0, 20)
    assert plain.decoder.layers[0].self_attn.transform.scaling == RopeScaling()
    for a, b in zip(plain.state_dict().values(), scaled.state_dict().values()):
        assert torch.equal(a, b)
    assert os.path.exists(checkpoint)


def test_auto_takes_each_sentences_factor_from_its_source_length():
    """--rope-scaling-factor auto: s = max(1, n / L) per sentence, n its source tokens (EOS included); a
    sentence gets the output of a model given its own s as a fixed factor, alone or batched."""
    auto, task = build_model(["--rope-scaling", "linear", "--rope-scaling-factor", "auto",
                              "--rope-scaling-train-length", "4"], arch="rope_transformer_tiny")
    src, lengths, prev = random_batch(task.source_dictionary, [11, 2, 7], [5, 5, 5])
    with torch.no_grad():
        out = auto(src, lengths, prev)[0]
        for row, n in enumerate(lengths.tolist()):  # 12, 3 and 8 tokens: s = 3, 1 (n < L) and 2
            s = max(1.0, n / 4)
            flags = ["--rope-scaling", "linear", "--rope-scaling-factor", str(s)] if s > 1 else []
            fixed, _ = build_model(flags, arch="rope_transformer_tiny")
            one_src = src[row:row + 1, -n:]  # alone: without the left padding
            torch.testing.assert_close(out[row], fixed(one_src, lengths[row:row + 1], prev[row:row + 1])[0][0],
                                       atol=1e-5, rtol=0)
    assert not torch.allclose(out[0], build_model([], arch="rope_transformer_tiny")[0](
        src[:1, -12:], lengths[:1], prev[:1])[0][0], atol=1e-3)  # the long sentence is scaled


@pytest.mark.parametrize("method", ["linear", "ntk", "yarn"])
def test_auto_keeps_the_mixer_contract(method):
    """The contract's model-level checks (tests/test_mixer_contract.py runs them on the mixers alone too, where
    no encoder gives source lengths): padding invariance, incremental decoding == teacher forcing, beam
    reordering (the decoder's source lengths follow the reordered encoder output)."""
    model, task = build_model(["--rope-scaling", method, "--rope-scaling-factor", "auto",
                               "--rope-scaling-train-length", "3"], arch="rope_transformer_tiny")
    d = task.source_dictionary
    check_padding_invariance(model, d, atol=1e-5)
    check_incremental_equals_teacher_forced(model, d, atol=1e-5)
    check_beam_reordering(model, d, atol=1e-5)


def test_auto_needs_the_training_length():
    with pytest.raises(ValueError, match="--rope-scaling-factor auto: needs --rope-scaling-train-length"):
        build_model(["--rope-scaling", "ntk", "--rope-scaling-factor", "auto"], arch="rope_transformer_tiny")
    with pytest.raises(ValueError, match="--rope-scaling-factor auto: has no effect with --rope-scaling none"):
        build_model(["--rope-scaling-factor", "auto", "--rope-scaling-train-length", "4"],
                    arch="rope_transformer_tiny")
    with pytest.raises(ValueError, match="--rope-scaling-factor half: must be a number or auto"):
        build_model(["--rope-scaling", "ntk", "--rope-scaling-factor", "half"], arch="rope_transformer_tiny")


def test_auto_reads_the_training_length_a_checkpoint_stores(tmp_path):
    """--rope-scaling-train-length given in training is stored with the model's flags: at generation,
    --model-overrides only turns auto scaling on."""
    data_bin = write_synthetic_data_bin(str(tmp_path / "data"), train=40, valid=5, test=5)
    checkpoint, _ = train_and_generate(data_bin, str(tmp_path / "ckpt"), "rope_transformer_tiny", updates=1,
                                       extra=["--rope-scaling-train-length", "12"])
    (model,), _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides={
        "data": data_bin, "rope_scaling": "linear", "rope_scaling_factor": "auto"})
    assert model.encoder.layers[0].self_attn.transform.scaling == RopeScaling("linear", "auto", 12)



def test_scaling_a_model_without_rope_is_refused():
    """Issue 49 item 6: a Transformer given --model-overrides "{'rope_scaling': 'yarn', ...}" decoded as without
    it, exit 0, and took ``auto`` without a training length, which a RoPE model refuses."""
    with pytest.raises(ValueError, match="--rope-scaling-factor auto: needs --rope-scaling-train-length"):
        build_model(["--rope-scaling", "yarn", "--rope-scaling-factor", "auto"])
    with pytest.raises(ValueError, match=r"^--rope-scaling ntk: the model has no rope mixer \(its mixers: mha\), "
                                         "so nothing would change"):
        build_model(["--rope-scaling", "ntk", "--rope-scaling-factor", "2"])
    for arch in ("rope_transformer_tiny", "xpos_transformer_tiny"):  # xPos: RoPE in the encoder
        build_model(["--rope-scaling", "ntk", "--rope-scaling-factor", "2"], arch=arch)
