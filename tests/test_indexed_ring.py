"""mixers/indexed_ring.py: rPosNet's decoding ring read through composed beam indices. A beam reorder copies no
ring and composes one index for every layer; the translations are covered by test_constant_state_decoding.py's
beam tests (rposnet_folded) and tests/test_posnet.py's pad after steps without pads."""
import torch
from fairseq_testing import build_model, dummy_dictionary, random_batch

from posnet_fairseq.mixers import indexed_ring, state_reorder


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
