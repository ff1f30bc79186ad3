"""AAN / AAN+ beyond the shared contract: the parallel masked form, a naive
O(m^2) loop and the step-by-step recurrence agree; AVG is the classic gated
cumulative average; the decoding state does not grow; nothing overflows."""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fairseq_testing import build_model, launching_kernels, step_kernels_after_reorder, step_mixer
from posnet_fairseq.mixers.aan import LEVEL, AverageAttention, weighted_prefix_average
from posnet_fairseq.mixers.forward_context import ForwardContext
from posnet_fairseq.mixers.registry import MIXERS, MixerContext
from posnet_fairseq.sites import SITE

C = 16
CONFIGS = {
    "avg": dict(patterns=["avg"]),
    "ner": dict(patterns=["ner"]),
    "far": dict(patterns=["far"]),
    "wet": dict(patterns=["wet"]),
    "ner_relu": dict(patterns=["ner"], activation="relu"),
    "ner_square": dict(patterns=["ner"], activation="square"),
    "wet_relu": dict(patterns=["wet"], activation="relu"),
    "wet_square": dict(patterns=["wet"], activation="square"),
    "ner_far": dict(patterns=["ner", "far"]),
    "all": dict(patterns=["avg", "ner", "far", "wet"]),
    "ffn": dict(patterns=["avg"], ffn_dim=24),
    # Scores spanning several reference levels: exp(0.5 * 512) and exp(+-200).
    "ner_steep": dict(patterns=["ner"], alpha=0.5),
    "wet_steep": dict(patterns=["wet"], wet_scale=400.0),
}


def make_mixer(patterns, wet_scale=None, seed=0, **kwargs):
    torch.manual_seed(seed)
    mixer = AverageAttention(C, 2, patterns, **kwargs).eval()
    if wet_scale is not None:
        with torch.no_grad():
            mixer.wet_proj.weight.mul_(wet_scale)
    return mixer


def naive_average(mixer, z):
    """Eqs. 4, 6-10 written out: for each j, sum_{k<=j} a_k z_k / sum_{k<=j} a_k, in float64.

    a_k is evaluated directly (exp(alpha k) for k = 1..j); float64 holds it up to k = 7000.
    """
    z = z.double()
    T = z.size(0)
    k = torch.arange(1, T + 1, dtype=torch.float64).view(T, 1, 1)
    averages = []
    for name in mixer.patterns:
        if name == "avg":
            a = torch.ones_like(k)
        elif name == "far":
            a = torch.exp(-mixer.beta * k)
        else:
            x = mixer.alpha * k if name == "ner" else mixer.gamma * (z @ mixer.wet_proj.weight.double().t())
            a = {"exp": torch.exp, "relu": torch.relu, "square": torch.square}[mixer.activation](x)
        a = a.expand_as(z)
        g = torch.zeros_like(z)
        for j in range(T):
            den = a[: j + 1].sum(0)
            num = (a[: j + 1] * z[: j + 1]).sum(0)
            g[j] = torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))
        averages.append(g)
    return torch.stack(averages).mean(0)


def gated(mixer, z, g):
    """Eqs. 3, 5 with the mixer's own parameters (and the 2018 FFN on g when present), float64."""
    g = g.to(torch.float32)
    if mixer.ffn is not None:
        g = mixer.ffn(g)
    W, b = mixer.gate.weight.double(), mixer.gate.bias.double()
    zg = torch.cat([z.double(), g.double()], -1)
    i, f = torch.sigmoid(zg @ W.t() + b).chunk(2, -1)
    return i * z.double() + f * g.double()


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("length", [1, 512])
def test_parallel_equals_naive_loop_equals_recurrence(name, length):
    mixer = make_mixer(**CONFIGS[name])
    z = torch.randn(length, 2, C, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        reference = gated(mixer, z, naive_average(mixer, z)).float()
        parallel = mixer(z, z, z)[0]
        recurrent, _ = step_mixer(mixer, z)
        blocks, _ = step_mixer(mixer, z, block=7)  # incremental calls with several tokens at once
    torch.testing.assert_close(parallel, reference, atol=1e-5, rtol=0)
    torch.testing.assert_close(recurrent, reference, atol=1e-5, rtol=0)
    torch.testing.assert_close(blocks, reference, atol=1e-5, rtol=0)


def test_steep_configs_span_several_levels():
    """The steep configs above really exercise more than one reference level."""
    z = torch.randn(512, 2, C, generator=torch.Generator().manual_seed(0))
    wet = make_mixer(**CONFIGS["wet_steep"])
    scores = wet.gamma * (z @ wet.wet_proj.weight.t())
    assert scores.max() - scores.min() > 3 * LEVEL
    assert CONFIGS["ner_steep"]["alpha"] * 512 > 3 * LEVEL


def test_avg_is_the_classic_gated_cumulative_average():
    mixer = make_mixer(["avg"])
    z = torch.randn(20, 3, C)
    counts = torch.arange(1, 21, dtype=torch.float32).view(20, 1, 1)
    mean = torch.cumsum(z, 0) / counts
    W_i, W_f = mixer.gate.weight[:C], mixer.gate.weight[C:]
    b_i, b_f = mixer.gate.bias[:C], mixer.gate.bias[C:]
    zg = torch.cat([z, mean], -1)
    expected = torch.sigmoid(zg @ W_i.t() + b_i) * z + torch.sigmoid(zg @ W_f.t() + b_f) * mean
    with torch.no_grad():
        torch.testing.assert_close(mixer(z, z, z)[0], expected, atol=1e-6, rtol=0)
        torch.testing.assert_close(step_mixer(mixer, z)[0], expected, atol=1e-6, rtol=0)


def _state_numel(state):
    return sum(t.numel() for buf in state.values() for t in buf.values() if isinstance(t, torch.Tensor))


@pytest.mark.parametrize("name", ["avg", "ner_far", "wet", "all"])
def test_decoding_state_does_not_grow(name):
    mixer = make_mixer(**CONFIGS[name])
    z = torch.randn(500, 3, C)
    with torch.no_grad():
        _, state = step_mixer(mixer, z[:5])
        after_5 = _state_numel(state)
        step_mixer(mixer, z[5:], incremental_state=state)
    assert after_5 == _state_numel(state) > 0


@pytest.mark.parametrize("name", ["avg", "ner", "far", "wet", "ner_relu", "wet_square", "all", "ffn"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_finite_at_length_1024(name, dtype):
    mixer = make_mixer(**CONFIGS[name]).to(dtype)
    z = torch.randn(1024, 2, C).to(dtype)
    with torch.no_grad():
        parallel = mixer(z, z, z)[0]
        recurrent, _ = step_mixer(mixer, z)
    assert parallel.dtype == recurrent.dtype == dtype
    assert torch.isfinite(parallel).all() and torch.isfinite(recurrent).all()
    # The two paths agree to the precision of the dtype (the sums run in fp32 in both).
    torch.testing.assert_close(parallel.float(), recurrent.float(), atol=1e-5 if dtype == torch.float32 else 2e-2,
                               rtol=0)


@pytest.mark.parametrize("name", ["ner", "far", "wet", "wet_relu", "ner_far"])
def test_gradients_finite_with_padding_at_length_1024(name):
    """Right-padded targets: pad keys never create 0/0, in the output or the gradients."""
    mixer = make_mixer(**CONFIGS[name]).train()
    z = torch.randn(1024, 2, C, requires_grad=True)
    pad = torch.zeros(2, 1024, dtype=torch.bool)
    pad[1, 300:] = True
    out = mixer(z, z, z, key_padding_mask=pad)[0]
    out.pow(2).sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(z.grad).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in mixer.parameters())


def test_avg_decoding_keeps_the_mean_until_a_pad_or_a_block_needs_the_sums():
    """AVG's steps without pads keep the running mean in place (the mean form); a pad step (the second row
    ends) or a block of several tokens continues from the sums made from it. Every real row equals the
    teacher-forced pass, at each switch."""
    mixer = make_mixer(["avg"])
    z = torch.randn(12, 2, C, generator=torch.Generator().manual_seed(3))
    pad = torch.zeros(2, 12, dtype=torch.bool)
    pad[1, 9:] = True  # right padding: the second row ends after 9 tokens
    with torch.no_grad():
        expected = mixer(z, z, z, key_padding_mask=pad)[0]
        state, outs = {}, []
        for t in range(6):  # one token at a time: the mean form
            outs.append(mixer(z[t: t + 1], z[t: t + 1], z[t: t + 1], incremental_state=state)[0])
        assert set(mixer._get_input_buffer(state)) == {"avg_mean", "avg_count"}
        outs.append(mixer(z[6:9], z[6:9], z[6:9], incremental_state=state)[0])  # a block: the sums
        assert "avg_mean" not in mixer._get_input_buffer(state)
        for t in range(9, 12):  # pad steps of the second row
            outs.append(mixer(z[t: t + 1], z[t: t + 1], z[t: t + 1], key_padding_mask=pad[:, : t + 1],
                              incremental_state=state)[0])
    decoded = torch.cat(outs)
    torch.testing.assert_close(decoded[:, 0], expected[:, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(decoded[:9, 1], expected[:9, 1], atol=1e-6, rtol=0)


def test_avg_decoding_with_a_pad_from_the_first_step_uses_the_sums():
    mixer = make_mixer(["avg"])
    z = torch.randn(4, 2, C, generator=torch.Generator().manual_seed(4))
    pad = torch.zeros(2, 4, dtype=torch.bool)
    pad[1, 0] = True  # a left pad
    with torch.no_grad():
        expected = mixer(z, z, z, key_padding_mask=pad)[0]
        state, outs = {}, []
        for t in range(4):
            outs.append(mixer(z[t: t + 1], z[t: t + 1], z[t: t + 1], key_padding_mask=pad[:, : t + 1],
                              incremental_state=state)[0])
    assert "avg_mean" not in mixer._get_input_buffer(state)
    torch.testing.assert_close(torch.cat(outs)[:, 0], expected[:, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.cat(outs)[1:, 1], expected[1:, 1], atol=1e-6, rtol=0)


def test_an_avg_decoding_step_with_its_beam_reorder_launches_seven_kernels():
    """Issue 48: on a GPU a decoding step is bound by kernel launches. A beam reorder and a step of AVG
    launch the mean's index_select, its in-place update (lerp_), the gate's cat, linear and sigmoid and
    o = i * z + f * g as one product and one fused multiply-add: 7 (on 9592acc: 11, the sum and the count
    each reordered, added to and divided; the output two products and a sum). The count is a Python int: no
    scalar read (on 80a7eae: one, of a tensor made at every step)."""
    mixer = make_mixer(["avg"])
    z = torch.randn(6, 4, C)
    order = torch.tensor([1, 0, 3, 2])
    with torch.inference_mode():
        _, state = step_mixer(mixer, z[:5])

        def step():
            mixer.reorder_incremental_state(state, order)
            mixer(z[5:], z[5:], z[5:], incremental_state=state)
        names = launching_kernels(step)
    assert len(names) == 7 and "aten::_local_scalar_dense" not in names, names


def _avg_layers(count):
    """``count`` AVG layers built as a decoder builds them, sharing one side's ForwardContext."""
    context = ForwardContext()
    torch.manual_seed(0)
    return context, [MIXERS["aan"].build(MixerContext(
        site=SITE["decoder_self"], embed_dim=C, num_heads=2, kdim=C, layer_idx=i, num_layers=count,
        args=argparse.Namespace(decoder_ffn_embed_dim=32, aan_patterns="avg"), padding_idx=1,
        forward_context=context)).eval()
        for i in range(count)]


def test_six_avg_layers_with_their_beam_reorder_launch_six_kernels_per_layer_and_one():
    """Issue 48: the six layers' means are one tensor, so a beam reorder copies them with one index_select, and
    each layer launches its mean's update and the gate's five: 6 x 6 + 1 = 37 (on b7b2892: 42, each layer's mean
    reordered on its own)."""
    context, layers = _avg_layers(6)
    z = torch.randn(6, 4, C)
    order = torch.tensor([1, 0, 3, 2])
    names = step_kernels_after_reorder(context, layers, z, order)
    assert len(names) == 37 and names.count("aten::index_select") == 1, names


def test_avg_layers_sharing_their_means_decode_as_the_teacher_forced_pass_through_reorders():
    """Three layers keep their means in one tensor: through a reorder that drops a row, one to more rows (a row
    repeated) and a pad that turns the means into sums, each layer's output at every step equals the
    teacher-forced pass over its row's history."""
    context, layers = _avg_layers(3)
    orders = {3: torch.tensor([2, 0, 1]), 6: torch.tensor([0, 0, 1, 2, 2])}
    history = [torch.zeros(0, 4, C) for _ in layers]
    pads = torch.zeros(4, 0, dtype=torch.bool)
    state = {}
    with torch.no_grad():
        for t in range(10):
            if t in orders:
                for layer in layers:
                    layer.reorder_incremental_state(state, orders[t])
                history, pads = [h[:, orders[t]] for h in history], pads[orders[t]]
            pads = torch.cat([pads, torch.zeros(pads.size(0), 1, dtype=torch.bool)], 1)
            pads[1, -1] = t == 8  # a pad key in row 1 at step 8 (the sums from there on)
            with context.call():
                for i, layer in enumerate(layers):
                    x = torch.randn(1, history[i].size(1), C)
                    history[i] = torch.cat([history[i], x])
                    stepped = layer(x, x, x, key_padding_mask=pads if pads.any() else None,
                                    incremental_state=state)[0]
                    forced = layer(history[i], history[i], history[i], key_padding_mask=pads)[0][-1:]
                    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)
            assert ("avg_mean" in layers[0]._get_input_buffer(state)) == (t < 8)


def test_a_reorder_gives_every_layer_one_fresh_copy_of_the_means_that_they_write_in_place():
    """The layers write their means in place (lerp_), so a reorder must hand them one tensor (once for all:
    state_reorder.COMPOSED) in memory of its own: not the means reordered from, nor a view of them (an identity
    order included), nor memory that another holder writes. A write into the means reordered from then leaves
    the reordered ones as they were, and the next steps write only the new tensor."""
    context, layers = _avg_layers(3)
    z = torch.randn(5, 4, C, generator=torch.Generator().manual_seed(5))
    state = {}
    with torch.no_grad():
        for t in range(5):
            if t >= 3:
                before = layers[0]._get_input_buffer(state)["avg_mean"]
                order = torch.tensor([2, 2, 0, 1]) if t == 3 else torch.arange(4)  # the second: identity
                for layer in layers:
                    layer.reorder_incremental_state(state, order)
                after = [layer._get_input_buffer(state)["avg_mean"] for layer in layers]
                assert all(a is after[0] for a in after)
                assert after[0].untyped_storage().data_ptr() != before.untyped_storage().data_ptr()
                expected = before[order].clone()
                before.fill_(float("nan"))  # another holder's write
                torch.testing.assert_close(after[0], expected, atol=0, rtol=0)
                kept = after[0].clone()
            with context.call():
                for layer in layers:
                    layer(z[t: t + 1], z[t: t + 1], z[t: t + 1], incremental_state=state)
            if t >= 3:
                assert torch.isfinite(after[0]).all() and not torch.equal(after[0], kept)  # stepped in place


class Calls(TorchFunctionMode):
    """The outputs of the calls of ``func`` (a torch function or Tensor method) made under it, in order (a list, on
    entering)."""

    def __init__(self, *funcs):
        super().__init__()
        self.funcs = funcs

    def __enter__(self):
        super().__enter__()
        self.outputs = []
        return self.outputs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.funcs:
            self.outputs.append(out)
        return out


def test_an_fp32_decoding_step_converts_no_dtype():
    """An fp32 query is averaged as it is and the average is not converted back (no operator dispatched per layer
    and step, issue 48); a bf16 query is averaged in fp32 and its output is bf16."""
    mixer = make_mixer(["avg"], seed=3)
    z = torch.randn(3, 2, C, generator=torch.Generator().manual_seed(4))
    state = {}
    with torch.no_grad():
        for t in range(3):
            with Calls(torch.Tensor.float, torch.Tensor.to) as conversions:
                out = mixer(z[t: t + 1], z[t: t + 1], z[t: t + 1], incremental_state=state)[0]
            assert conversions == [] and out.dtype == torch.float32
        with Calls(torch.Tensor.float, torch.Tensor.to) as conversions:
            half = mixer.to(torch.bfloat16)(z[:1].bfloat16(), None, None)[0]
    assert len(conversions) >= 2 and half.dtype == torch.bfloat16


def test_the_gate_writes_in_place_without_gradients_and_keeps_the_query_dtype_under_autocast():
    """Without gradients Eq. 5 is taken in the gate's output: the values of the out-of-place products, the gate's
    own output tensor returned; under autocast (a bf16 gate, an fp32 query) out of place, in fp32."""
    mixer = make_mixer(["avg"], seed=3)
    x = torch.randn(5, 3, C, generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), Calls(F.linear) as gate_outputs:  # (a hook would make the gate a module call)
        y = mixer(x, x, x)[0]
    with torch.no_grad():
        g = weighted_prefix_average(x.new_zeros(5, 3, 1), x)[0]  # AVG's average (Eqs. 7, 11)
        i, f = torch.sigmoid(mixer.gate(torch.cat([x, g], dim=-1))).chunk(2, dim=-1)
    assert torch.equal(y, torch.addcmul(i * x, f, g))
    assert len(gate_outputs) == 1 and y.data_ptr() == gate_outputs[0].data_ptr()  # written into the gate's output
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), Calls(F.linear) as gate_outputs:
        z = mixer(x, x, x)[0]
    assert gate_outputs[-1].dtype == torch.bfloat16 and z.dtype == torch.float32
    assert torch.allclose(z, y, atol=0.05)


def test_left_and_right_padding_give_the_same_real_rows():
    mixer = make_mixer(**CONFIGS["all"])
    z = torch.randn(9, 1, C)
    padded = torch.cat([torch.randn(4, 1, C), z, torch.randn(3, 1, C)])  # 4 pads left, 3 right
    pad = torch.ones(1, 16, dtype=torch.bool)
    pad[0, 4:13] = False
    with torch.no_grad():
        torch.testing.assert_close(mixer(padded, padded, padded, key_padding_mask=pad)[0][4:13],
                                   mixer(z, z, z)[0], atol=1e-6, rtol=0)


def _ctx(**flags):
    return MixerContext(site=SITE["decoder_self"], embed_dim=C, num_heads=2, kdim=C, layer_idx=0, num_layers=1,
                        args=argparse.Namespace(decoder_ffn_embed_dim=32, **flags), padding_idx=1)


@pytest.mark.parametrize("flags, message", [
    (dict(aan_patterns="ner,near"), "--aan-patterns ner,near"),
    (dict(aan_patterns="ner,ner"), "listed twice"),
    (dict(aan_patterns=""), "--aan-patterns"),
    (dict(aan_activation="tanh"), "--aan-activation tanh"),
    (dict(aan_alpha=0.0), "--aan-alpha 0.0"),
    (dict(aan_gamma=math.inf), "--aan-gamma inf"),
    (dict(aan_ffn=True, aan_ffn_dim=0), "--aan-ffn-dim 0"),
])
def test_bad_flags_fail_at_build_time(flags, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        MIXERS["aan"].build(_ctx(**flags))


def test_ffn_defaults_to_the_decoder_ffn_dim():
    mixer = MIXERS["aan"].build(_ctx(aan_ffn=True))
    assert mixer.ffn[0].out_features == 32


@pytest.mark.parametrize("arch, patterns, ffn", [
    ("aan_plus_avg_tiny", ["avg"], False),
    ("aan_plus_ner_tiny", ["ner"], False),
    ("aan_plus_far_tiny", ["far"], False),
    ("aan_plus_wet_tiny", ["wet"], False),
    ("aan_tiny", ["avg"], True),
])
def test_architectures_put_aan_in_every_decoder_layer_only(arch, patterns, ffn):
    model, _ = build_model(arch=arch)
    for layer in model.decoder.layers:
        assert isinstance(layer.self_attn, AverageAttention)
        assert layer.self_attn.patterns == patterns and (layer.self_attn.ffn is not None) == ffn
    assert not any(isinstance(m, AverageAttention) for m in model.encoder.modules())


def test_flags_override_the_preset_and_deep_has_12_layers():
    model, _ = build_model(["--aan-patterns", "ner,far"], arch="aan_plus_ner_tiny")
    assert model.decoder.layers[0].self_attn.patterns == ["ner", "far"]
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["aan_plus_wet_deep"](args)
    assert (args.encoder_layers, args.decoder_layers, args.decoder_embed_dim) == (12, 12, 512)
    assert args.decoder_self_mixer == "aan" and args.aan_patterns == "wet"
