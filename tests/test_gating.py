"""The PosNet GeLU gating (Eq. 4) as a site wrapper: the formula, the flags, the parameter
deltas, and the shared contract checks for gated mha and gated rposnet."""
import argparse
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import nn

import test_mixer_contract as contract
from fairseq_testing import build_model, random_batch
from posnet_fairseq.mixers.gating import GatedMixer, ValueActivation, gate_module

ALL_SITES_GATED = ["--encoder-self-gating", "on", "--decoder-self-gating", "on", "--cross-gating", "on"]
GATED_MODELS = {
    "mha": ALL_SITES_GATED,
    "rposnet": ALL_SITES_GATED + ["--encoder-self-mixer", "rposnet", "--decoder-self-mixer", "rposnet",
                                  "--cross-mixer", "rposnet", "--length-ratio", "1.5"],
    "rposnet_glu_sigmoid": ALL_SITES_GATED + ["--encoder-self-mixer", "rposnet", "--decoder-self-mixer", "rposnet",
                                              "--length-ratio", "1.0", "--gating-value-act", "glu",
                                              "--gating-gate-act", "sigmoid", "--gating-gate-norm"],
}


def gating_args(**overrides):
    args = dict(gating_value_act="gelu", gating_gate_act="gelu", gating_no_value_norm=False, gating_gate_norm=False)
    args.update(overrides)
    return argparse.Namespace(**args)


@pytest.fixture(scope="module", params=sorted(GATED_MODELS))
def gated_case(request):
    model, task = build_model(GATED_MODELS[request.param])
    assert all(isinstance(layer.self_attn, GatedMixer) for layer in model.encoder.layers)
    return model, task.source_dictionary, "decoder_self"


def test_gated_padding_invariance(gated_case):
    contract.test_padding_invariance(gated_case)


def test_gated_incremental_equals_teacher_forced(gated_case):
    contract.test_incremental_equals_teacher_forced(gated_case)


def test_gated_beam_reordering(gated_case):
    contract.test_beam_reordering(gated_case)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_gated_numerics_at_longest_length(gated_case, dtype):
    contract.test_numerics_at_longest_length(gated_case, dtype)


@pytest.mark.parametrize("self_attention", [True, False], ids=["self", "cross"])
def test_gated_mha_equals_equation_4(self_attention):
    """out = W_o(concat_h(softmax(q k^T / sqrt(d)) v'_h * g_h)), v' = LN(GELU(W_v x)), g = GELU(W_g y)."""
    torch.manual_seed(0)
    D, H, T, S = 8, 2, 5, 6 if not self_attention else 5
    mha = MultiheadAttention(D, H, self_attention=self_attention, encoder_decoder_attention=not self_attention)
    gated = gate_module(mha, gating_args()).eval()
    y = torch.randn(T, 1, D)
    x = y if self_attention else torch.randn(S, 1, D)
    with torch.no_grad():
        out, _ = gated(y, x, x, static_kv=not self_attention)
        q = mha.q_proj(y)[:, 0].view(T, H, -1).transpose(0, 1) / math.sqrt(D // H)
        k = mha.k_proj(x)[:, 0].view(S, H, -1).transpose(0, 1)
        v = F.layer_norm(F.gelu(mha.v_proj.proj(x)), (D,), mha.v_proj.norm.weight, mha.v_proj.norm.bias)
        v = v[:, 0].view(S, H, -1).transpose(0, 1)
        heads = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v  # H x T x D_h
        g = F.gelu(gated.gate_proj(y[:, 0]))
        expected = gated.out_proj(heads.transpose(0, 1).reshape(T, D) * g)
    torch.testing.assert_close(out[:, 0], expected, atol=1e-5, rtol=0)


D = 16


def count(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("value_act,gate_act,value_norm,gate_norm,delta", [
    ("gelu", "gelu", True, False, D * D + D + 2 * D),      # the paper's gating: W_g and LN(v')
    ("gelu", "gelu", False, False, D * D + D),
    ("glu", "gelu", True, False, 2 * (D * D + D) + 2 * D),  # GLU: W_v maps to 2D
    ("sigmoid", "none", True, False, 2 * D),                # no gate: only LN(v')
    ("none", "sigmoid", True, True, D * D + D + 4 * D),
])
def test_gating_parameter_deltas(value_act, gate_act, value_norm, gate_norm, delta):
    mha = MultiheadAttention(D, 2, self_attention=True)
    before = count(mha)
    gated = gate_module(mha, gating_args(gating_value_act=value_act, gating_gate_act=gate_act,
                                         gating_no_value_norm=not value_norm, gating_gate_norm=gate_norm))
    assert count(gated) - before == delta
    assert isinstance(gated, GatedMixer) == (gate_act != "none")


def test_per_layer_gating_spec_and_none_layers():
    model, _ = build_model(["--encoder-self-gating", "on,off", "--decoder-self-mixer", "none,mha",
                            "--decoder-self-gating", "on"])
    assert isinstance(model.encoder.layers[0].self_attn, GatedMixer)
    assert isinstance(model.encoder.layers[1].self_attn, MultiheadAttention)
    assert type(model.decoder.layers[0].self_attn).__name__ == "NoMixer"  # nothing to gate
    assert isinstance(model.decoder.layers[1].self_attn, GatedMixer)


@pytest.mark.parametrize("spec, reason", [
    ("on,on,on", "gives 3 per-layer values but the model has 2 layers"),
    ("yes", "'yes' is not one of on, off"),
    ("on,maybe", "'maybe' is not one of on, off"),
])
def test_bad_gating_spec_fails_at_build_naming_the_flag(spec, reason):
    with pytest.raises(ValueError, match=f"--cross-gating {spec}: {reason}"):
        build_model(["--cross-gating", spec])


def test_gating_a_mixer_without_the_interface_fails():
    class Opaque(nn.Module):
        pass

    with pytest.raises(ValueError, match="--encoder-self-gating on: Opaque has no v_proj/out_proj"):
        gate_module(Opaque(), gating_args(), "--encoder-self-gating")


def test_self_attention_values_and_gate_are_one_product_equal_to_the_two():
    """Issue 22: at a self-attention site W_v and W_g are one Linear layer; its output equals the two
    products of the unfused gating (<= 1e-6 in fp32), and cross attention keeps them apart."""
    model, _ = build_model(GATED_MODELS["rposnet"])
    gated = model.decoder.layers[0].self_attn
    assert gated.value_gate_proj is not None and gated.gate_proj is None and gated.act_both
    cross = model.decoder.layers[0].encoder_attn
    assert cross.value_gate_proj is None and isinstance(cross.gate_proj, nn.Linear)
    D = gated.embed_dim
    W, b = gated.value_gate_proj.weight, gated.value_gate_proj.bias
    x = torch.randn(7, 3, D, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = gated(x, x, x)[0]
        # The unfused computation: W_v x and W_g x as two products.
        # (the GeLU of the values, applied by the wrapper with the gate's: gated.act_both)
        heads = gated.mixer(x, x, F.gelu(F.linear(x, W[:D], b[:D])))[0]
        expected = gated.out_proj(heads * F.gelu(F.linear(x, W[D:], b[D:])))
    assert (out - expected).abs().max() <= 1e-6


def test_a_gated_rposnet_decoding_step_calls_three_modules():
    """Issue 48 (host time per layer and step): a decoding step of gated rPosNet decoder self-attention calls the
    wrapper, the mixer and its values' activation as modules; its Linear layers and LayerNorm are applied as their
    functions (functional_calls.py), and the mixer's identity ``out_proj`` not at all."""
    model, _ = build_model(GATED_MODELS["rposnet"])
    gated = model.eval().decoder.layers[0].self_attn
    x = torch.randn(3, 2, gated.embed_dim, generator=torch.Generator().manual_seed(0))
    called, state, outs = [], {}, []
    handle = nn.modules.module.register_module_forward_pre_hook(lambda module, args: called.append(type(module)))
    try:
        with torch.no_grad():
            for t in range(3):
                called.clear()
                outs.append(gated(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state)[0])
                assert called == [GatedMixer, type(gated.mixer), ValueActivation]
    finally:
        handle.remove()
    with torch.no_grad():  # (as teacher-forced: the contract's test, here on the path these calls take)
        assert (torch.cat(outs) - gated(x, x, x)[0]).abs().max() <= 1e-6


def test_a_checkpoint_from_before_the_fusion_loads_and_computes_the_same():
    """State-dict keys of the unfused gating (W_o inside the mixer as out_proj.proj, W_v as the mixer's
    v_proj.proj, W_g as gate_proj) load into the fused modules with the same outputs."""
    model, task = build_model(GATED_MODELS["rposnet"])
    old = {}
    for key, value in model.state_dict().items():
        stem, _, name = key.rpartition(".")
        if stem.endswith(".value_gate_proj"):  # split the fused layer back into W_v and W_g
            owner = stem[: -len("value_gate_proj")]
            D = value.size(0) // 2
            old[f"{owner}mixer.v_proj.proj.{name}"], old[f"{owner}gate_proj.{name}"] = value[:D], value[D:]
        elif stem.endswith("self_attn.out_proj") or stem.endswith("encoder_attn.out_proj"):
            if f"{stem[: -len('out_proj')]}mixer.v_proj.norm.weight" in model.state_dict():  # a gated mixer's W_o
                old[f"{stem[: -len('out_proj')]}mixer.out_proj.proj.{name}"] = value
            else:
                old[key] = value
        else:
            old[key] = value
    assert any(".mixer.out_proj.proj." in k for k in old) and any(".mixer.v_proj.proj." in k for k in old)
    fresh, _ = build_model(GATED_MODELS["rposnet"], seed=7)
    fresh.load_state_dict(old, strict=True)
    tokens, lengths, prev = random_batch(task.source_dictionary, [6, 3], [5, 2])
    with torch.no_grad():
        assert torch.equal(fresh(tokens, lengths, prev)[0], model(tokens, lengths, prev)[0])


@pytest.mark.parametrize("act", ["gelu", "sigmoid"])
def test_without_gradients_the_stacked_product_is_activated_in_place_with_the_same_output(act):
    """Issue 48: with no gradient to keep, the wrapper applies the activation of the stacked values and gate in
    place (its in-place operator, the same kernel): the output is the out-of-place call's, bit for bit."""
    flags = GATED_MODELS["rposnet"] + ["--gating-value-act", act, "--gating-gate-act", act]
    model, _ = build_model(flags)
    gated = model.eval().decoder.layers[0].self_attn
    assert gated.act_both
    x = torch.randn(4, 3, gated.embed_dim, generator=torch.Generator().manual_seed(0))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        with torch.no_grad():
            in_place = gated(x, x, x)[0]
    names = [e.name for e in profiler.events()]
    assert f"aten::{act}_" in names and f"aten::{act}" not in names, names
    torch.testing.assert_close(in_place, gated(x, x, x)[0], atol=0, rtol=0)  # (with gradients: out of place)


# A torch without the private binding: removed before posnet_fairseq.mixers.gating is imported, which is when the
# gate picks its in-place GeLU (a second import in this process would register its flags and wrapper again).
WITHOUT_THE_BINDING = textwrap.dedent("""
    import torch
    import torch.nn.functional as F

    binding = torch._C._nn.gelu_
    del torch._C._nn.gelu_
    from posnet_fairseq.mixers.gating import IN_PLACE

    fallback = IN_PLACE[F.gelu]
    assert fallback is torch.ops.aten.gelu_, fallback
    x = torch.cat([6 * torch.randn(10000, generator=torch.Generator().manual_seed(0)),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 3e38, -3e38])])
    by_fallback, by_binding = x.clone(), x.clone()
    assert fallback(by_fallback) is by_fallback and binding(by_binding) is by_binding  # in place, as the binding
    assert by_fallback.dtype == torch.float32 and not torch.equal(by_fallback, x)
    assert torch.equal(by_fallback, by_binding), (by_fallback - by_binding).abs().max()
    assert torch.equal(by_fallback, F.gelu(x)), (by_fallback - F.gelu(x)).abs().max()
""")


def test_without_torchs_private_gelu_binding_the_gate_falls_back_to_the_public_operator_bit_for_bit():
    """The gate's in-place GeLU (gating.IN_PLACE) is torch's private binding ``torch._C._nn.gelu_`` where torch
    has it and the registered operator ``aten.gelu_`` where not: in a fresh interpreter without the binding, the
    fallback is taken and gives the binding's values and F.gelu's, exactly in fp32, in place."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", WITHOUT_THE_BINDING], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=repo, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
