"""Hard-coded Gaussian attention (You et al., 2020) beyond the shared mixer contract:
the weight profiles, border cut-offs, the length-ratio centres of HC-ALL, the
parameter budget of the hard-coded heads, SH-X's single learned cross head,
the -SA / -FF ablations and the build-time checks of the flags."""
import argparse
import math
import re

import pytest
import torch

from fairseq_testing import (
    build_model, decode_incrementally, random_batch, step_kernels_after_reorder, train_and_generate,
    write_synthetic_data_bin,
)
from posnet_fairseq import flags
from posnet_fairseq.mixers import hc_decoding
from posnet_fairseq.mixers.forward_context import ForwardContext
from posnet_fairseq.mixers.registry import MIXERS, MixerContext
from posnet_fairseq.sites import SITE
from posnet_fairseq.mixers.hc_gaussian import HardCodedSelfAttention
from posnet_fairseq.mixers.none import NoMixer

PDF = [1 / math.sqrt(2 * math.pi) * math.exp(-0.5 * d * d) for d in range(6)]  # N(0, 1) at 0..5


def make_args(**values):
    args = argparse.Namespace(attention_dropout=0.0, **values)
    flags.set_defaults(args)
    return args


def build_mixer(name, site, embed_dim=8, num_heads=2, layer_idx=0, num_layers=1, kdim=None, forward_context=None,
                **flags):
    args = make_args(**flags)
    ctx = MixerContext(site=SITE[site], embed_dim=embed_dim, num_heads=num_heads, kdim=kdim or embed_dim,
                       layer_idx=layer_idx, num_layers=num_layers, args=args, padding_idx=1,
                       length_ratio=args.length_ratio, forward_context=forward_context)
    return MIXERS[name].build(ctx)


def head_weights(mixer, length, key_padding_mask=None, query_length=None, batch=1, dtype=torch.float32):
    """H x B x T x S weights as the mixer applies them."""
    kdim = mixer.v_proj.in_features
    x = torch.randn(query_length or length, batch, mixer.embed_dim, dtype=dtype)
    kv = x if query_length is None else torch.randn(length, batch, kdim, dtype=dtype)
    with torch.no_grad():
        return mixer(x, kv, kv, key_padding_mask=key_padding_mask, need_head_weights=True)[1]


# --- weights --------------------------------------------------------------------------


def test_five_point_profile_of_a_head_centred_at_position_two():
    mixer = build_mixer("hc_gaussian", "encoder_self", hc_encoder_offsets="c")
    row = head_weights(mixer, 5)[0, 0, 2]
    assert [round(w, 3) for w in row.tolist()] == [0.054, 0.242, 0.399, 0.242, 0.054]


def test_offsets_move_the_centre_one_step_left_and_right():
    mixer = build_mixer("hc_gaussian", "encoder_self", hc_encoder_offsets="l,r")
    w = head_weights(mixer, 7)[:, 0]
    for i in range(7):
        assert w[0, i].argmax().item() == max(i - 1, 0)
        assert w[1, i].argmax().item() == min(i + 1, 6)


def test_border_rows_are_cut_not_renormalised():
    encoder = head_weights(build_mixer("hc_gaussian", "encoder_self"), 6)[:, 0]  # offsets l, r
    assert encoder[0, 0].sum().item() == pytest.approx(0.300, abs=1e-3)  # offset -1 at position 0: 0.3005
    assert encoder[0, 0].sum().item() == pytest.approx(sum(PDF[1:6]), abs=1e-6)
    assert encoder[1, 5].sum().item() == pytest.approx(0.300, abs=1e-3)  # offset +1 at the last position
    assert encoder[0, 3].sum().item() == pytest.approx(1.0, abs=0.01)  # interior rows keep about 1
    decoder = head_weights(build_mixer("hc_gaussian", "decoder_self"), 6)[:, 0]  # offsets l, c
    assert round(decoder[0, 0].sum().item(), 3) == 0.242  # offset -1 at position 0: only the (future-free) key 0
    assert decoder[1, 0].sum().item() == pytest.approx(PDF[0], abs=1e-6)
    assert (decoder.triu(diagonal=1) == 0).all()  # nothing from the future


def test_padding_gets_no_weight_and_is_not_renormalised():
    """Left padding: the real tokens see the same weights (over their columns) as unpadded."""
    mixer = build_mixer("hc_gaussian", "encoder_self")
    x = torch.randn(4, 1, 8)
    padded = torch.cat([torch.randn(3, 1, 8), x], dim=0)
    mask = torch.tensor([[True] * 3 + [False] * 4])
    with torch.no_grad():
        alone = mixer(x, x, x)[0]
        beside = mixer(padded, padded, padded, key_padding_mask=mask)[0]
    torch.testing.assert_close(beside[3:], alone, atol=1e-6, rtol=0)


def test_output_is_the_weighted_sum_of_projected_values():
    mixer = build_mixer("hc_gaussian", "encoder_self", embed_dim=4, num_heads=2)
    x = torch.randn(5, 1, 4)
    with torch.no_grad():
        out, w = mixer(x, x, x, need_head_weights=True)
        v = mixer.v_proj(x[:, 0]).view(5, 2, 2)  # S x H x d
        mixed = torch.einsum("hts,shd->thd", w[:, 0], v).reshape(5, 4)
    torch.testing.assert_close(out[:, 0], mixer.out_proj(mixed), atol=1e-6, rtol=0)


def test_conv_and_index_variants():
    conv = head_weights(build_mixer("hc_gaussian", "encoder_self", hc_encoder_offsets="c", hc_kernel="conv"), 5)
    assert [round(w, 3) for w in conv[0, 0, 2].tolist()] == [0.0, 0.242, 0.399, 0.242, 0.0]
    index = head_weights(build_mixer("hc_gaussian", "encoder_self", hc_kernel="index"), 5)[:, 0]
    assert torch.equal(index[0], torch.eye(5).roll(-1, dims=1).tril())  # offset -1: copy the previous token
    assert torch.equal(index[1], torch.eye(5).roll(1, dims=1).triu())  # offset +1: copy the next token


def test_sigma_widens_the_gaussian():
    row = head_weights(build_mixer("hc_gaussian", "encoder_self", hc_encoder_offsets="c", hc_sigma=2.0), 9)[0, 0, 4]
    expected = [math.exp(-((j - 4) ** 2) / 8) / (2 * math.sqrt(2 * math.pi)) for j in range(9)]
    torch.testing.assert_close(row, torch.tensor(expected), atol=1e-6, rtol=0)


def test_weights_are_computed_in_fp32_then_cast():
    mixer = build_mixer("hc_gaussian", "encoder_self", hc_encoder_offsets="c")
    reference = head_weights(mixer, 40)
    w = head_weights(mixer.to(torch.bfloat16), 40, dtype=torch.bfloat16).float()
    torch.testing.assert_close(w, reference.to(torch.bfloat16).float(), atol=0, rtol=0)


# --- hard-coded cross attention (HC-ALL) -----------------------------------------------


def test_gamma_two_puts_the_offset_zero_peak_at_twice_the_target_position_with_left_padding():
    mixer = build_mixer("hc_gaussian_cross", "cross", embed_dim=6, num_heads=3, length_ratio=2.0)
    lengths = [11, 7]
    mask = torch.tensor([[False] * 11, [True] * 4 + [False] * 7])  # fairseq left-pads sources
    w = head_weights(mixer, 11, key_padding_mask=mask, query_length=4, batch=2)
    for b, n in enumerate(lengths):
        pads = 11 - n
        for i in range(4):
            if 2 * i + 1 < n:
                assert w[1, b, i].argmax().item() == pads + 2 * i  # offset 0
                assert w[0, b, i].argmax().item() == (pads + 2 * i - 1 if i else pads)  # offset -1
                assert w[1, b, i, pads + 2 * i].item() == pytest.approx(PDF[0], abs=1e-6)
        assert (w[:, b, :, :pads] == 0).all()  # pads get no weight
    # the sentence gives the same output padded as alone
    x, enc = torch.randn(4, 1, 6), torch.randn(7, 1, 6)
    with torch.no_grad():
        alone = mixer(x, enc, enc)[0]
        padded_enc = torch.cat([torch.randn(4, 1, 6), enc])
        beside = mixer(x, padded_enc, padded_enc, key_padding_mask=mask[1:])[0]
    torch.testing.assert_close(beside, alone, atol=1e-6, rtol=0)


def test_cross_centre_floor_versus_exact():
    floor = build_mixer("hc_gaussian_cross", "cross", embed_dim=3, num_heads=3, length_ratio=1.5)
    exact = build_mixer("hc_gaussian_cross", "cross", embed_dim=3, num_heads=3, length_ratio=1.5,
                        hc_cross_center="exact")
    wf = head_weights(floor, 8, query_length=3)[1, 0, 1]  # offset 0, target position 1: centre 1.5
    we = head_weights(exact, 8, query_length=3)[1, 0, 1]
    assert wf.argmax().item() == 1 and wf[1].item() == pytest.approx(PDF[0], abs=1e-6)
    half = math.exp(-0.125) / math.sqrt(2 * math.pi)
    assert we[1].item() == pytest.approx(half, abs=1e-6) and we[2].item() == pytest.approx(half, abs=1e-6)


def test_cross_attention_projects_the_encoder_once_while_decoding():
    mixer = build_mixer("hc_gaussian_cross", "cross", embed_dim=6, num_heads=3, length_ratio=1.0)
    x, enc = torch.randn(3, 2, 6), torch.randn(5, 2, 6)
    state = {}
    with torch.no_grad():
        full = mixer(x, enc, enc)[0]
        first = mixer(x[:1], enc, enc, incremental_state=state, static_kv=True)[0]
        garbage = torch.randn_like(enc)  # after step 0 the cached projection is used
        rest = [mixer(x[t: t + 1], garbage, garbage, incremental_state=state, static_kv=True)[0] for t in (1, 2)]
    torch.testing.assert_close(torch.cat([first] + rest), full, atol=1e-6, rtol=0)
    assert set(mixer._get_input_buffer(state)) == {"value", "key_positions", "key_padding_mask", "steps"}


def _decoder_self(embed_dim=64, **flags):
    """Decoder self-attention of 2 heads (window 16: sigma 1, offsets l,c); heads of 32 dimensions by default."""
    return build_mixer("hc_gaussian", "decoder_self", embed_dim=embed_dim, num_heads=2, max_target_positions=64,
                       **flags).eval()


def _decoder_layers(count, embed_dim=64, **flags):
    """``count`` layers of :func:`_decoder_self` that share one side's ForwardContext, as a model's decoder."""
    context = ForwardContext()
    return context, [build_mixer("hc_gaussian", "decoder_self", embed_dim=embed_dim, num_heads=2, layer_idx=i,
                                 num_layers=count, max_target_positions=64, forward_context=context, **flags).eval()
                     for i in range(count)]


def test_a_decoding_step_of_six_layers_with_its_beam_reorder_launches_three_kernels_per_layer_and_two():
    """Issue 48: on a GPU a decoding step is bound by kernel launches. A beam reorder of six HC-SA decoder
    self-attention layers composes their shared ring index once (index_select); the index after the step (the
    bags' input) is made once for every layer (where); each layer launches its value projection written into
    its ring slot (mm), one weighted embedding_bag (a copy_ on the CPU) and its output projection:
    6 x 3 + 2 = 20 (on b7b2892: 30, each layer's reorder copying its ring, the projection copied into it, a
    bmm). The step count is a Python int: no scalar read (on 80a7eae: one per layer). The step is one once the
    ring is full (window 16), as every step is on a GPU; a CPU step before reads the filled slots only (the next
    test) and launches one copy more, the index cut for every layer."""
    context, layers = _decoder_layers(6)
    x = torch.randn(18, 4, 64)
    order = torch.tensor([1, 0, 3, 2])
    names = step_kernels_after_reorder(context, layers, x, order)
    assert len(names) == 20 and "aten::_local_scalar_dense" not in names, names
    assert names.count("aten::index_select") == names.count("aten::where") == 1
    assert len(step_kernels_after_reorder(context, layers, x[:6], order)) == 21


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_layers_sharing_the_ring_index_decode_as_the_teacher_forced_pass_through_reorders(bias):
    """Three layers read their rings through one composed index: through a reorder that drops a row and one to
    more rows (a row repeated), past the ring's wrap (window 16, 24 steps), each layer's output at every step
    (its value projected into the ring: mm, or addmm with a bias) equals the teacher-forced pass over its row's
    history."""
    context, layers = _decoder_layers(3, hc_bias=bias)
    orders = {4: torch.tensor([2, 0, 1]), 9: torch.tensor([0, 0, 1, 2, 2]), 17: torch.tensor([4, 3, 1, 0, 2])}
    history = [torch.zeros(0, 4, 64) for _ in layers]
    state = {}
    with torch.no_grad():
        for t in range(24):
            if t in orders:
                for layer in layers:
                    layer.reorder_incremental_state(state, orders[t])
                history = [h[:, orders[t]] for h in history]
            with context.call():
                for i, layer in enumerate(layers):
                    x = torch.randn(1, history[i].size(1), 64)
                    history[i] = torch.cat([history[i], x])
                    stepped = layer(x, x, x, incremental_state=state)[0]
                    forced = layer(history[i], history[i], history[i])[0][-1:]
                    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)


def test_steps_before_the_ring_is_full_read_the_filled_slots_only_and_sum_as_the_whole_ring(monkeypatch):
    """On the CPU a step n before the ring is full (window 16) reads n + 1 rows per bag, then the whole ring; its
    outputs equal, bit for bit, those of the same layers reading the whole ring at every step (as on a GPU),
    through a reorder that drops a row and one to more rows, past the ring's fill."""
    context, layers = _decoder_layers(3)
    orders = {4: torch.tensor([2, 0, 1]), 9: torch.tensor([0, 0, 1, 2, 2])}
    read, bags = hc_decoding.indexed_ring.read, []
    monkeypatch.setattr(hc_decoding.indexed_ring, "read", lambda ring, rows, offsets, weights: (
        bags.append(rows.numel() // offsets.numel()), read(ring, rows, offsets, weights))[1])
    states = {"cpu": {}, "whole ring": {}}
    with torch.no_grad():
        for t in range(20):
            x = torch.randn(1, 5 if t >= 9 else 3, 64)
            outputs = {}
            for how, state in states.items():
                monkeypatch.setattr(hc_decoding, "PREFIX_DEVICES", ("cpu",) if how == "cpu" else ())
                if t in orders:
                    for layer in layers:
                        layer.reorder_incremental_state(state, orders[t])
                with context.call():
                    outputs[how] = [layer(x, x, x, incremental_state=state)[0] for layer in layers]
            assert all(torch.equal(a, b) for a, b in zip(outputs["cpu"], outputs["whole ring"])), t
            # the weights cut for the steps before the ring is full are kept until the last of them
            assert all(("filled_weights" in layer._get_input_buffer(states["cpu"])) == (t < 14) for layer in layers)
    per_step = [bags[i: i + 6] for i in range(0, len(bags), 6)]  # 3 layers reading the filled slots, 3 the ring
    assert [sizes[:3] for sizes in per_step] == [[min(t + 1, 16)] * 3 for t in range(20)]
    assert all(sizes[3:] == [16] * 3 for sizes in per_step)


def test_a_reorder_to_more_rows_decodes_every_row():
    """The weights repeated for the rows are made for the search's first rows; a reorder that repeats rows
    (4 hypotheses from 2) makes them for the new count, and each row equals the teacher-forced pass over its
    history."""
    mixer = _decoder_self()
    x = torch.randn(8, 2, 64)
    more = torch.tensor([0, 0, 1, 1])
    with torch.no_grad():
        state = {}
        for t in range(5):
            mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state)
        mixer.reorder_incremental_state(state, more)
        wide = x[:, more]
        stepped = torch.cat([mixer(wide[t: t + 1], wide[t: t + 1], wide[t: t + 1], incremental_state=state)[0]
                             for t in range(5, 8)])
        forced = mixer(wide, wide, wide)[0][5:]
    torch.testing.assert_close(stepped, forced, atol=1e-6, rtol=0)

@pytest.mark.parametrize("embed_dim, repeated", [(64, True), (16, False)])
def test_the_weights_are_repeated_for_the_rows_only_where_no_larger_than_the_ring(embed_dim, repeated):
    """The rows' weights hold window / D_h times the ring's numbers: a window of 16 beside heads of 32
    dimensions repeats them, beside heads of 8 keeps the product with weights broadcast over the rows; both
    decode as the teacher-forced pass."""
    mixer = _decoder_self(embed_dim)
    x = torch.randn(20, 3, embed_dim)
    with torch.no_grad():
        state = {}
        stepped = torch.cat([mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state)[0]
                             for t in range(20)])
        forced = mixer(x, x, x)[0]
    assert mixer.window == 16 and ("row_weights" in mixer._get_input_buffer(state)) == repeated
    torch.testing.assert_close(stepped, forced, atol=1e-6, rtol=0)

# --- parameters --------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_hard_coded_heads_have_only_value_and_output_projections(bias):
    D, K = 8, 12
    for name, site, kdim in (("hc_gaussian", "encoder_self", D), ("hc_gaussian", "decoder_self", D),
                             ("hc_gaussian_cross", "cross", K)):
        mixer = build_mixer(name, site, embed_dim=D, kdim=kdim, hc_bias=bias, length_ratio=1.0)
        names = {n for n, _ in mixer.named_parameters()}
        expected = {"v_proj.weight", "out_proj.weight"} | ({"v_proj.bias", "out_proj.bias"} if bias else set())
        assert names == expected
        assert sum(p.numel() for p in mixer.parameters()) == kdim * D + D * D + (2 * D if bias else 0)
        assert not mixer.state_dict().keys() - expected  # offsets are configuration, not state


def test_model_parameter_savings_are_the_query_and_key_projections():
    D, L = 16, 2
    transformer = sum(p.numel() for p in build_model()[0].parameters())
    hc_sa = sum(p.numel() for p in build_model(arch="hc_gaussian_tiny")[0].parameters())
    assert transformer - hc_sa == 2 * L * 2 * (D * D + D) + 2 * L * 2 * D  # W_Q, W_K and the v/o biases
    hc_all = sum(p.numel() for p in build_model(["--length-ratio", "1.2"], arch="hc_gaussian_all_tiny")[0]
                 .parameters())
    assert hc_sa - hc_all == L * (2 * (D * D + D) + 2 * D)


# --- SH-X ----------------------------------------------------------------------------------


def test_shx_has_one_cross_attention_module_with_one_head():
    from fairseq.modules import MultiheadAttention

    model = build_model(arch="hc_gaussian_shx_tiny", dims=())[0]
    layers = model.decoder.layers
    assert len(layers) == 3
    cross = [layer.encoder_attn for layer in layers]
    assert cross[0] is None and cross[1] is None
    assert isinstance(cross[2], MultiheadAttention)
    assert cross[2].num_heads == 1 and cross[2].head_dim == model.args.decoder_embed_dim
    learned = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
    assert learned == [cross[2]]
    assert all(isinstance(layer.self_attn, HardCodedSelfAttention) for layer in list(layers) + list(
        model.encoder.layers))


def test_learned_cross_heads_spread_over_layers_or_gathered_in_one():
    spread = build_model(["--learned-cross-layers", "0,1,-1"], arch="hc_gaussian_shx_tiny", dims=())[0]
    assert [layer.encoder_attn.num_heads for layer in spread.decoder.layers] == [1, 1, 1]
    gathered = build_model(["--learned-cross-heads", "4"], arch="hc_gaussian_shx_tiny", dims=())[0]
    heads = [None if layer.encoder_attn is None else layer.encoder_attn.num_heads
             for layer in gathered.decoder.layers]
    assert heads == [None, None, 4]


def test_shx_translates_incrementally_like_teacher_forcing():
    model, task = build_model(arch="hc_gaussian_shx_tiny")
    tokens, lengths, prev = random_batch(task.source_dictionary, [5, 8], [6, 6])
    with torch.no_grad():
        full = model(tokens, lengths, prev)[0]
    torch.testing.assert_close(decode_incrementally(model, tokens, lengths, prev), full, atol=1e-5, rtol=0)


# --- -SA and -FF ----------------------------------------------------------------------------


def _ffn(layer, x):
    return layer.fc2(torch.relu(layer.fc1(x)))


def test_no_self_attention_layers_lack_the_sub_layer():
    D, F = 16, 32
    model = build_model(arch="transformer_nosa_tiny")[0]
    enc_layer, dec_layer = model.encoder.layers[0], model.decoder.layers[0]
    assert isinstance(enc_layer.self_attn, NoMixer) and isinstance(enc_layer.self_attn_layer_norm, torch.nn.Identity)
    # FFN + its LayerNorm only
    assert sum(p.numel() for p in enc_layer.parameters()) == D * F + F + F * D + D + 2 * D
    # cross attention + LayerNorm, FFN + LayerNorm
    assert sum(p.numel() for p in dec_layer.parameters()) == 4 * (D * D + D) + 2 * D + D * F + F + F * D + D + 2 * D
    x = torch.randn(5, 2, D)
    with torch.no_grad():
        out = enc_layer(x, encoder_padding_mask=None)
        torch.testing.assert_close(out, enc_layer.final_layer_norm(x + _ffn(enc_layer, x)), atol=1e-6, rtol=0)
        enc = torch.randn(7, 2, D)
        out = dec_layer(x, encoder_out=enc, encoder_padding_mask=None)[0]
        h = dec_layer.encoder_attn_layer_norm(x + dec_layer.encoder_attn(x, enc, enc, static_kv=True)[0])
        torch.testing.assert_close(out, dec_layer.final_layer_norm(h + _ffn(dec_layer, h)), atol=1e-6, rtol=0)


def test_no_feed_forward_layers_lack_the_sub_layer():
    D = 16
    model = build_model(["--no-encoder-ffn", "--no-decoder-ffn"], arch="hc_gaussian_tiny")[0]
    enc_layer, dec_layer = model.encoder.layers[0], model.decoder.layers[0]
    # hard-coded self-attention (v, o) + its LayerNorm only
    assert sum(p.numel() for p in enc_layer.parameters()) == 2 * D * D + 2 * D
    assert sum(p.numel() for p in dec_layer.parameters()) == 2 * D * D + 2 * D + 4 * (D * D + D) + 2 * D
    x = torch.randn(5, 2, D)
    with torch.no_grad():
        out = enc_layer(x, encoder_padding_mask=None)
        torch.testing.assert_close(out, enc_layer.self_attn_layer_norm(x + enc_layer.self_attn(x, x, x)[0]),
                                   atol=1e-6, rtol=0)


def test_shx_without_self_attention_has_only_one_attention_module():
    model = build_model(arch="hc_gaussian_shx_nosa_tiny")[0]
    assert all(isinstance(layer.self_attn, NoMixer) for layer in list(model.encoder.layers) + list(
        model.decoder.layers))
    assert [layer.encoder_attn is None for layer in model.decoder.layers] == [True, False]


# --- configuration ---------------------------------------------------------------------------


def test_offsets_are_cyclic_per_head_and_settable_per_layer():
    mixer = build_mixer("hc_gaussian", "encoder_self", embed_dim=8, num_heads=4, hc_encoder_offsets="l,c,r")
    assert mixer.offsets.tolist() == [-1, 0, 1, -1]
    spec = "l,c;-2,0.5,r,3"
    layers = [build_mixer("hc_gaussian", "encoder_self", embed_dim=8, num_heads=4, layer_idx=i, num_layers=2,
                          hc_encoder_offsets=spec).offsets.tolist() for i in range(2)]
    assert layers == [[-1, 0, -1, 0], [-2, 0.5, 1, 3]]
    model = build_model(["--hc-decoder-offsets", "c;l"], arch="hc_gaussian_tiny")[0]
    assert [layer.self_attn.offsets.tolist() for layer in model.decoder.layers] == [[0, 0], [-1, -1]]


@pytest.mark.parametrize("flags, message", [
    (["--hc-encoder-offsets", "l,x"], "--hc-encoder-offsets l,x: 'x' is not an offset"),
    (["--hc-decoder-offsets", "l,c;l,c;l,c"], "--hc-decoder-offsets l,c;l,c;l,c: gives 3 per-layer values but the model has 2 layers"),
    (["--hc-encoder-offsets", "l,,r"], "--hc-encoder-offsets l,,r: '' is not an offset"),
    (["--hc-encoder-offsets", "nan"], "--hc-encoder-offsets nan: offset 'nan' is not finite"),
    (["--hc-sigma", "0"], "--hc-sigma 0.0: must be a positive number"),
])
def test_malformed_flags_fail_at_build_time_naming_the_flag(flags, message):
    with pytest.raises(ValueError) as error:
        build_model(flags, arch="hc_gaussian_tiny")
    assert message in str(error.value)


def test_bad_learned_cross_settings_fail_naming_the_flag():
    with pytest.raises(ValueError, match="--learned-cross-layers 3: layer 3 does not exist"):
        build_model(["--learned-cross-layers", "3"], arch="hc_gaussian_shx_tiny", dims=())
    with pytest.raises(ValueError, match="--learned-cross-heads 3: must be a positive divisor"):
        build_model(["--learned-cross-heads", "3"], arch="hc_gaussian_shx_tiny")


def test_hard_coded_cross_attention_needs_a_length_ratio():
    with pytest.raises(ValueError, match="--length-ratio -1.0"):
        build_model(["--length-ratio", "-1"], arch="hc_gaussian_all_tiny")


def test_iwslt_size():
    from fairseq import options as fairseq_options
    from fairseq_testing import PLUGIN_DIR

    parser = fairseq_options.get_training_parser()
    args = fairseq_options.parse_args_and_arch(parser, ["/x", "--user-dir", PLUGIN_DIR, "--arch",
                                                        "hc_gaussian_shx_iwslt"])
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
            args.encoder_layers) == (288, 507, 4, 5)
    assert (args.decoder_embed_dim, args.decoder_ffn_embed_dim, args.decoder_layers) == (288, 507, 5)
    assert args.cross_mixer == "none,none,none,none,learned_cross"
    assert args.encoder_self_mixer == args.decoder_self_mixer == "hc_gaussian"


# --- end to end -----------------------------------------------------------------------------------


def test_hc_all_stores_the_training_length_ratio_and_translates(tmp_path):
    from fairseq import checkpoint_utils

    from posnet_fairseq.data.length_ratio import length_ratio

    data_bin = write_synthetic_data_bin(str(tmp_path))
    checkpoint, out = train_and_generate(data_bin, str(tmp_path / "ckpt"), "hc_gaussian_all_tiny")
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)  # the safe loader
    stored = state["cfg"]["model"].length_ratio
    assert stored == pytest.approx(length_ratio(data_bin, "src", "tgt"))
    assert stored != 1.0
    hypotheses = re.findall(r"^H-(\d+)\t", out, flags=re.M)
    assert hypotheses and sorted(hypotheses) == sorted(re.findall(r"^S-(\d+)\t", out, flags=re.M))
