"""models/beam_cross_attention.py: the beam-shared cross attention's step attends as fairseq's per-hypothesis
attention does, keeps fairseq's parameters, and runs one product per product."""
import copy

import pytest
import torch
from fairseq.modules import MultiheadAttention

import fairseq_testing as ft
from posnet_fairseq.benchmark.launches import launching
from posnet_fairseq.models.beam_cross_attention import BeamCrossAttention

BEAM, DIM, HEADS = 3, 16, 4
LENGTHS = [6, 2, 5, 4]  # source lengths of the sentences: the longest is the batch's width


def _attentions(**kwargs):
    """fairseq's cross attention (beam 1: per hypothesis) and its copy adopted in beam mode."""
    torch.manual_seed(0)
    plain = MultiheadAttention(DIM, HEADS, kdim=DIM, vdim=DIM, encoder_decoder_attention=True, **kwargs).eval()
    shared = BeamCrossAttention.adopt(copy.deepcopy(plain))
    shared.set_beam_size(BEAM)
    return plain, shared


def _source():
    """The encoder output expanded to BEAM hypotheses per sentence (S x N x C) and its padding mask (N x S)."""
    lengths = torch.tensor(LENGTHS)
    pad = torch.arange(max(LENGTHS)).unsqueeze(0) >= lengths.unsqueeze(1)
    states = torch.randn(max(LENGTHS), len(LENGTHS), DIM, generator=torch.Generator().manual_seed(1))
    return states.repeat_interleave(BEAM, 1), pad.repeat_interleave(BEAM, 0)


def _orders():
    """Beam search's reorders before steps 2-5: within sentences, then the second sentence dropped (finished),
    then within the three left."""
    g = torch.Generator().manual_seed(2)

    def within(sentences):
        return (torch.arange(sentences).unsqueeze(1) * BEAM + torch.randint(BEAM, (sentences, BEAM), generator=g)
                ).flatten()

    kept = torch.tensor([0, 2, 3]).unsqueeze(1) * BEAM + torch.randint(BEAM, (3, BEAM), generator=g)
    return [within(4), within(4), kept.flatten(), within(3)]


def _decode(attention, query_steps, need_weights, need_head_weights):
    """The outputs and weights of five incremental steps of ``attention`` under the reorders of ``_orders``."""
    encoder_out, pad = _source()
    state, found = {}, []
    g = torch.Generator().manual_seed(3)
    for t, order in enumerate([None] + _orders()):
        if order is not None:
            attention.reorder_incremental_state(state, order)
            encoder_out, pad = encoder_out.index_select(1, order), pad.index_select(0, order)
        query = torch.randn(query_steps, pad.size(0), DIM, generator=g)
        found.append(attention(query, encoder_out, encoder_out, key_padding_mask=pad, incremental_state=state,
                               static_kv=True, need_weights=need_weights, need_head_weights=need_head_weights))
    return found


@pytest.mark.parametrize("query_steps", [1, 2])
@pytest.mark.parametrize("weights", ["none", "mean", "heads"])
def test_steps_attend_as_fairseqs_per_hypothesis_attention(weights, query_steps):
    """Outputs and attention weights (fairseq's layouts: their mean over heads N x T x S, or per head H x N x T x S)
    within float rounding at every step, through reorders within sentences and a finished sentence's drop."""
    plain, shared = _attentions()
    need = {"none": (False, False), "mean": (True, False), "heads": (True, True)}[weights]
    with torch.no_grad():
        for t, ((out, w), (expected, expected_w)) in enumerate(zip(_decode(shared, query_steps, *need),
                                                                   _decode(plain, query_steps, *need))):
            torch.testing.assert_close(out, expected, atol=1e-6, rtol=0, msg=lambda m: f"step {t}: {m}")
            if weights == "none":
                assert w is None and expected_w is None
            else:
                assert w.shape == expected_w.shape
                torch.testing.assert_close(w, expected_w, atol=1e-6, rtol=0, msg=lambda m: f"step {t}: {m}")


def test_the_cache_is_one_row_per_sentence_and_made_once():
    """The keys, values and padding mask are cached on the first step with a row per sentence; a later step runs
    one baddbmm and one bmm, copies only the query and output layouts, and neither masks nor converts the mask."""
    plain, shared = _attentions()
    encoder_out, pad = _source()
    state = {}
    with torch.no_grad():
        step = (lambda: shared(torch.randn(1, pad.size(0), DIM), encoder_out, encoder_out, key_padding_mask=pad,
                               incremental_state=state, static_kv=True, need_weights=False))
        step()
        assert {v.size(0) for v in shared._get_input_buffer(state).values()} == {len(LENGTHS)}
        with torch.profiler.profile() as profiler:
            step()
    names = [e.name for e in profiler.events()]
    assert names.count("aten::baddbmm") == 1 and names.count("aten::bmm") == 1
    assert names.count("aten::clone") == 2, names  # the query's and the output's layouts
    assert not {"aten::einsum", "aten::masked_fill", "aten::masked_fill_", "aten::_to_copy"} & set(names)


def test_the_first_step_gathers_the_sentences_rows_once_for_every_layer():
    """The key and value projections of every layer read one contiguous tensor of the first hypothesis's rows of
    the encoder output, made at the search's first step and kept in its incremental state, not each the strided
    rows (which a projection would gather itself)."""
    plain, shared = _attentions()
    layers, seen = (shared, copy.deepcopy(shared)), []
    layers[1].init_incremental_state()  # a state of its own, as another layer's
    for layer in layers:
        for projection in (layer.k_proj, layer.v_proj):
            projection.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    encoder_out, pad = _source()
    state = {}
    with torch.no_grad():
        for layer in layers:
            layer(torch.randn(1, pad.size(0), DIM), encoder_out, encoder_out, key_padding_mask=pad,
                  incremental_state=state, static_kv=True)
    assert len(seen) == 4 and all(rows is seen[0] for rows in seen) and seen[0].is_contiguous()
    assert torch.equal(seen[0], encoder_out[:, ::BEAM])


def _launches(attention, beam):
    """The operators of a later step of ``attention`` in beam mode ``beam`` that would launch a GPU kernel."""
    attention.set_beam_size(beam)
    encoder_out, pad = _source()
    state, query = {}, torch.randn(1, pad.size(0), DIM)
    with torch.no_grad():
        step = (lambda: attention(query, encoder_out, encoder_out, key_padding_mask=pad, incremental_state=state,
                                  static_kv=True, need_weights=False))
        step()  # the first step caches the source
        with torch.profiler.profile() as profiler:
            step()
    return len(launching(profiler.events()))


def test_the_step_launches_fewer_kernels_than_either_fairseq_path():
    """The counts models/beam_shared.py states, per layer and step: fairseq's per-hypothesis path 9, its beamable
    mode 13 (the beam laid out by copies), the step 7 (the two projections, the two layout copies, the two
    products and the softmax)."""
    plain, shared = _attentions()
    assert (_launches(plain, 1), _launches(copy.deepcopy(plain), BEAM), _launches(shared, BEAM)) == (9, 13, 7)


def test_the_module_keeps_fairseqs_parameters_and_paths():
    """The adopted module has fairseq's state dict (names and values) and loads it back; off its step (beam 1,
    teacher forcing) its outputs are fairseq's exactly; a module with extra key rows (add_bias_kv) is left as it
    is."""
    plain, shared = _attentions()
    assert type(shared) is BeamCrossAttention and list(shared.state_dict()) == list(plain.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(shared.state_dict().values(), plain.state_dict().values()))
    shared.load_state_dict(plain.state_dict())
    shared.set_beam_size(1)
    encoder_out, pad = _source()
    query = torch.randn(2, pad.size(0), DIM)
    with torch.no_grad():
        for state in ({}, None):
            got, expected = (m(query, encoder_out, encoder_out, key_padding_mask=pad, incremental_state=state,
                               static_kv=state is not None) for m in (shared, plain))
            assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    with_bias, _ = _attentions(add_bias_kv=True)
    assert type(BeamCrossAttention.adopt(with_bias)) is MultiheadAttention


@pytest.mark.parametrize("arch", ["posnet_transformer_tiny", "hc_gaussian_shx_tiny"])
def test_generation_prepares_the_step_unless_no_beamable_mm(arch):
    """make_generation_fast_ adopts the step for every cross attention that is fairseq's (``mha``,
    ``learned_cross``); with --no-beamable-mm (beamable_mm_beam_size None) they stay fairseq's module; the state
    dict is the same either way and loads into a fresh model."""
    model, _ = ft.build_model([], arch=arch)
    fresh = copy.deepcopy(model)
    plain = copy.deepcopy(model)
    model.make_generation_fast_(beamable_mm_beam_size=4)
    plain.make_generation_fast_(beamable_mm_beam_size=None)
    cross = [type(m) for m in model.decoder.modules() if isinstance(m, MultiheadAttention) and
             m.encoder_decoder_attention]
    assert cross and set(cross) == {BeamCrossAttention}
    assert {type(m) for m in plain.decoder.modules() if isinstance(m, MultiheadAttention) and
            m.encoder_decoder_attention} == {MultiheadAttention}
    assert list(model.state_dict()) == list(plain.state_dict()) == list(fresh.state_dict())
    fresh.load_state_dict(model.state_dict())
