"""mixers/indexed_ring.py: rPosNet's decoding ring read through composed beam indices. A beam reorder copies no
ring and composes one index for every layer; the translations are covered by test_constant_state_decoding.py's
beam tests (rposnet_folded) and tests/test_posnet.py's pad after steps without pads."""
import copy

import torch
from fairseq_testing import build_model, dummy_dictionary, random_batch

from posnet_fairseq import precompute
from posnet_fairseq.mixers import indexed_ring, posnet_decoding, state_reorder
from posnet_fairseq.models import int8
from test_mixer_contract import INT8_ATOL
from test_precompute import N, build, precompute_and_reload


def _decoder_states(model, state):
    return [layer.self_attn._get_input_buffer(state) for layer in model.decoder.layers]


def test_a_beam_reorder_copies_no_ring_and_composes_one_index_for_every_layer():
    model, _ = build_model(["--decoder-layers", "3", "--posnet-max-relative", "3"], arch="rposnet_transformer_tiny")
    model.make_generation_fast_()  # as fairseq-generate: folded tables, steps without pads read the ring
    src, src_lengths, prev = random_batch(dummy_dictionary(), [5, 7], [6, 6])[:3]
    state = {}
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        for t in range(5):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        before = _decoder_states(model, state)
        rings, index = [b["ring"] for b in before], before[0]["ring_index"]
        assert all(b["ring_index"] is index for b in before)  # made once per step for every layer
        order = torch.tensor([1, 1])
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profiler:
            model.decoder.reorder_incremental_state_scripting(state, order)
    after = _decoder_states(model, state)
    assert all(a["ring"] is ring for a, ring in zip(after, rings))  # not copied
    assert all(a["ring_index"] is after[0]["ring_index"] for a in after)
    torch.testing.assert_close(after[0]["ring_index"], index[order], atol=0, rtol=0)
    # the layers' self-attention reorder: one index_select (the index), none of a ring
    heads = model.decoder.layers[0].self_attn.num_heads
    selects = [e for e in profiler.events() if e.name == "aten::index_select"
               and e.input_shapes and e.input_shapes[0] == [2, heads, 3 + 3]]  # B x H x (K+3)
    assert len(selects) == 1, [e.input_shapes for e in profiler.events() if e.name == "aten::index_select"]


def test_compose_is_made_once_for_the_same_index_and_order_and_anew_otherwise():
    index, order = torch.arange(12).view(4, 3), torch.tensor([3, 3, 0, 1])
    first = state_reorder.compose(index, order)
    assert state_reorder.compose(index, order) is first
    torch.testing.assert_close(first, index[order], atol=0, rtol=0)
    other = torch.tensor([0, 1, 2, 2])
    assert state_reorder.compose(index, other) is not first
    torch.testing.assert_close(state_reorder.compose(index, other), index[other], atol=0, rtol=0)


def test_the_rings_constants_are_kept_for_the_last_shapes_used_only():
    """indexed_ring.cached keeps what the rings read per shape (made once, not per step), but only for the last
    CACHED shapes used: a process that decodes ever new row counts holds no more."""
    cpu = torch.device("cpu")
    made = [indexed_ring.identity(b, b, 2, 3, cpu) for b in range(1, indexed_ring.CACHED + 5)]
    assert len(indexed_ring._CACHE) == indexed_ring.CACHED
    assert indexed_ring.identity(5, 5, 2, 3, cpu) is made[4]  # among the last used: kept
    assert indexed_ring.identity(1, 1, 2, 3, cpu) is not made[0]  # the first: dropped, made anew
    # hypothesis 1, head 1, slot 2 of 2 rows: ring row (2 * 2 + 1) * 2 + 1
    assert indexed_ring.identity(2, 2, 2, 3, cpu)[1, 1, 2] == 11


def _decode(model, src, src_lengths, prev):
    """The decoder's outputs of ``prev`` step by step (one search) and teacher-forced."""
    with torch.no_grad():
        encoder_out, state = model.encoder(src, src_lengths), {}
        stepped = torch.cat([model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)[0]
                             for t in range(prev.size(1))], dim=1)
        return stepped, model.decoder(prev, encoder_out=encoder_out)[0], state


def test_a_step_looks_up_every_layers_ring_weights_at_once(monkeypatch):
    """A decoding step makes the ring weights of every layer of the side at once (issue 48: one operator per
    step, not one per layer), and each layer's are its own: the layers' rows are those of their tables."""
    model, _ = build_model(["--decoder-layers", "3", "--posnet-max-relative", "3"], arch="rposnet_transformer_tiny")
    model.make_generation_fast_()
    src, src_lengths, prev = random_batch(dummy_dictionary(), [5, 7], [6, 6])[:3]
    state = {}
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths)
        for t in range(4):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        made, row_weights = [], indexed_ring.row_weights
        monkeypatch.setattr(indexed_ring, "row_weights", lambda w, *a: made.append(w.shape) or row_weights(w, *a))
        model.decoder(prev[:, :5], encoder_out=encoder_out, incremental_state=state)
    layers = [layer.self_attn.mixer for layer in model.decoder.layers]
    width = layers[0].num_heads * (3 + 2) + 1  # a step's weights of one layer: H (K+2) + 1
    assert made == [(3, width)], made
    stacked = _decoder_states(model, state)[0]["ring_weights"]
    for i, layer in enumerate(layers):
        assert layer.ring_group[:2] == (layers, i)
        torch.testing.assert_close(stacked[i], posnet_decoding.decoding_rows(layer, layer.relative, 4)[1][
            : stacked.size(1)], atol=0, rtol=0)


def test_every_hypothesis_reads_its_heads_ring_rows_with_their_weights_and_its_tails_with_the_last():
    """:func:`indexed_ring.row_weights` in :func:`indexed_ring.step`'s order, written out: the K+2 output rows of
    every hypothesis b and head h (ring slots 0..K, then the tail) with weights h (K+2) .. h (K+2) + K+1 of the
    step's row, then the 2 rows of every hypothesis and head's next tail with its last entry; for every layer."""
    batch, heads, k = 3, 2, 4
    weights = torch.randn(5, heads * (k + 2) + 1).half()
    expected = [[row[h * (k + 2) + j] for b in range(batch) for h in range(heads) for j in range(k + 2)]
                + [row[-1]] * (2 * batch * heads) for row in weights.tolist()]
    assert indexed_ring.row_weights(weights, batch, heads).tolist() == expected


def test_a_precomputed_models_layers_step_with_their_own_ring_weights_made_anew_from_tables_loaded_in_place():
    """A posnet-precompute checkpoint rebuilds its mixers in table form, in no group of training layers
    (``side_layers``): each decoder layer still steps with the weights of its own table (6627ee1 gave every
    layer the first one's, so that the precomputed model decoded differently from the model it was folded
    from), and a new search reads the tables as they are then: written in place by ``load_state_dict``."""
    flags = ["--arch", "rposnet_transformer_tiny", "--decoder-layers", "3", "--posnet-max-relative", "3"]
    args, task, model = build(flags)
    reloaded = precompute_and_reload(args, task, model)[1]
    other = precompute_and_reload(*build(flags, seed=2))[1]
    src, src_lengths, prev = random_batch(task.target_dictionary, [5, 7], [9, 9])[:3]
    layers = [layer.self_attn.mixer for layer in reloaded.decoder.layers]
    assert all(layer.precomputed and not layer.side_layers for layer in layers)
    assert not torch.equal(layers[0].relative.table, layers[1].relative.table)
    stepped, forced, state = _decode(reloaded, src, src_lengths, prev)
    assert "ring" in _decoder_states(reloaded, state)[-1]  # (the ring's steps, not the general path)
    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)
    tables = [layer.relative.table for layer in layers]
    reloaded.load_state_dict(other.state_dict())
    assert all(layer.relative.table is table for layer, table in zip(layers, tables))  # written in place
    stepped, forced, _ = _decode(reloaded, src, src_lengths, prev)
    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)
    torch.testing.assert_close(forced, _decode(other, src, src_lengths, prev)[1], atol=1e-6, rtol=0)


def test_a_model_precomputed_in_place_after_decoding_groups_its_new_layers_alone():
    """``precompute_model_`` swaps the mixers of a model that may have decoded: the table forms step as one group
    of the side's layers (their ring weights looked up at once, as a reloaded checkpoint's), and the context lists
    none of the mixers they replaced (stacked needlessly, and kept alive with the position parameters that
    precomputing drops)."""
    flags = ["--arch", "rposnet_transformer_tiny", "--decoder-layers", "3", "--posnet-max-relative", "3"]
    _, task, model = build(flags)
    model.make_generation_fast_()
    src, src_lengths, prev = random_batch(task.target_dictionary, [5, 7], [9, 9])[:3]
    _decode(model, src, src_lengths, prev)
    old = [layer.self_attn.mixer for layer in model.decoder.layers]
    precompute.precompute_model_(model, N)
    stepped, forced, _ = _decode(model, src, src_lengths, prev)
    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)
    layers = [layer.self_attn.mixer for layer in model.decoder.layers]
    assert [layer.ring_group[:2] for layer in layers] == [(layers, i) for i in range(3)]
    listed = [id(m) for side in (model.encoder, model.decoder) for members in side.forward_context._members.values()
              for m in members]
    assert not set(listed) & {id(m) for m in old}


def test_an_int8_models_ring_is_fp16_and_decodes_as_with_an_fp32_ring():
    """models/int8.py tells rPosNet that its model is int8 (``int8_``): its decoding ring and the weights it is
    read with are fp16, half the bytes a step reads; the fp32 model's stay fp32. The int8 search's outputs are
    those of the same int8 model with an fp32 ring and those of teacher forcing, within the contract's int8
    tolerance (tests/test_mixer_contract.py: the next layer's input quantised per call turns fp16's rounding into
    int8 steps; an error in the state shows as differences of order 1). The ring alone, without int8 layers after
    it, is within fp16's rounding: tests/test_posnet.py's pad after steps without pads."""
    model, _ = build_model(["--decoder-layers", "2", "--posnet-max-relative", "3"], arch="rposnet_transformer_tiny")
    model.eval().make_generation_fast_()
    quantized = int8.quantize_(copy.deepcopy(model), "all")
    src, src_lengths, prev = random_batch(dummy_dictionary(), [5, 7], [9, 9])[:3]
    fp32_state = _decode(model, src, src_lengths, prev)[2]
    assert _decoder_states(model, fp32_state)[0]["ring"].dtype == torch.float32
    stepped, forced, state = _decode(quantized, src, src_lengths, prev)
    assert all(s["ring"].dtype == torch.float16 for s in _decoder_states(quantized, state))
    assert _decoder_states(quantized, state)[0]["ring_weights"].dtype == torch.float16
    for layer in quantized.decoder.layers:
        layer.self_attn.mixer.ring_dtype = None  # as before int8_: fp32
    wide, _, wide_state = _decode(quantized, src, src_lengths, prev)
    assert _decoder_states(quantized, wide_state)[0]["ring"].dtype == torch.float32
    torch.testing.assert_close(stepped, wide, atol=INT8_ATOL, rtol=0)
    torch.testing.assert_close(stepped, forced, atol=INT8_ATOL, rtol=0)
