"""How a beam reorder copies each decoding-state tensor (posnet_fairseq/mixers/state_reorder.py).

Every state tensor of every registered decoder mixer (each site and variant
of the contract tests) is stored with ``Mixer.keep_state``, which declares
whether a reorder copies it into fresh memory or into the memory the
previous reorder released; a tensor stored without a declaration makes the
reorder fail, and the check below names it.
"""
import pytest
import torch

from fairseq_testing import build_model, dummy_dictionary, launching_kernels, random_batch, random_sentences, src_batch
from posnet_fairseq.mixers import growing_cache, state_reorder
from posnet_fairseq.mixers.base import Mixer
from posnet_fairseq.mixers.state_reorder import COPY, GROW, PER_SENTENCE, REUSE
from test_mixer_contract import CASES, _model

DECODER_CASES = [case for case in CASES if case[1] in ("decoder_self", "cross")]
ORDERS = {2: torch.tensor([1, 0, 3, 2]), 3: torch.tensor([1, 1, 2, 3]), 5: torch.tensor([2, 3])}
STEPS = 7


def decode_with_reorders(model, d):
    """The decoder's incremental state after STEPS steps of two sentences with two beams each, reordered
    before the steps in ORDERS as SequenceGenerator does (beams permuted, duplicated, sentences dropped)."""
    g = torch.Generator().manual_seed(0)
    tokens, lengths = src_batch(random_sentences([6, 3], g, d), d.pad(), d.eos())
    beams = torch.arange(2).repeat_interleave(2)
    tokens, lengths = tokens[beams], lengths[beams]
    prev = torch.cat([torch.full((4, 1), d.eos()), torch.randint(d.nspecial, len(d), (4, STEPS), generator=g)], 1)
    state = {}
    with torch.no_grad():
        encoder_out = model.encoder(tokens, lengths)
        for t in range(STEPS):
            if t in ORDERS:
                model.decoder.reorder_incremental_state_scripting(state, ORDERS[t])
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, ORDERS[t])
                prev = prev[ORDERS[t]]
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
    return state


def undeclared_state(model, state):
    """{mixer class: buffer keys of its state tensors stored without a declaration}."""
    found = {}
    for module in model.decoder.modules():
        if isinstance(module, Mixer):
            keys = [key for key in module._get_input_buffer(state)
                    if not key.endswith(Mixer.SPARE) and key not in module._state_reorders]
            if keys:
                found[type(module).__name__] = keys
    return found


@pytest.mark.parametrize("name,site,variant,flags", DECODER_CASES,
                         ids=[f"{n}-{s}-{v}" for n, s, v, _ in DECODER_CASES])
def test_every_state_tensor_declares_how_a_reorder_copies_it(name, site, variant, flags):
    model, task = _model(name, site, variant)
    state = decode_with_reorders(model, task.source_dictionary)
    assert undeclared_state(model, state) == {}


def test_an_undeclared_state_tensor_is_named_and_refused():
    model, task = _model("rope", "decoder_self", "default")
    state = decode_with_reorders(model, task.source_dictionary)
    mixer = model.decoder.layers[0].self_attn
    buffer = mixer._get_input_buffer(state)
    buffer["history"] = torch.zeros(2, 3)  # stored around keep_state
    mixer._set_input_buffer(state, buffer)
    assert undeclared_state(model, state) == {type(mixer).__name__: ["history"]}
    with pytest.raises(ValueError, match="decoding state 'history' was stored without declaring"):
        mixer.reorder_incremental_state(state, torch.tensor([0, 1]))


@pytest.mark.parametrize("how", [REUSE, GROW], ids=["reuse", "grow"])
def test_a_reused_state_is_copied_into_the_memory_the_previous_reorder_released(how):
    """Beam orders that keep and then shrink the batch: the values are index_select's, written into
    the spare; the memory each reorder releases is the next one's spare. (A grown state first fits the
    memory of the reorder before last: the first reorder's state was no allocation of this module.)"""
    state, spare = torch.randn(4, 2, 3, 5), None
    orders = [torch.tensor([3, 3, 0, 1]), torch.tensor([1, 0, 2, 2]), torch.tensor([0, 1, 1, 3]), torch.tensor([2, 0])]
    for t, order in enumerate(orders):
        reordered, released = state_reorder.reorder(state, order, spare, how)
        assert torch.equal(reordered, state.index_select(0, order))
        if t >= (1 if how is REUSE else 2):
            assert reordered.data_ptr() == spare.data_ptr()
        assert released.untyped_storage().data_ptr() == state.untyped_storage().data_ptr()  # its whole storage
        state, spare = reordered, released


def test_a_copied_state_is_reordered_into_fresh_memory():
    mixer = Mixer(4, 2)
    buffer, state = {}, {}
    original = mixer.keep_state(buffer, "counts", torch.arange(6.0).view(3, 2), COPY)
    mixer._set_input_buffer(state, buffer)
    mixer.reorder_incremental_state(state, torch.tensor([2, 0]))
    reordered = mixer._get_input_buffer(state)
    assert set(reordered) == {"counts"}  # no spare kept
    assert torch.equal(reordered["counts"], original[[2, 0]]) and reordered["counts"].data_ptr() != original.data_ptr()


def top_level_operators(function):
    """The aten operators that ``function`` calls itself (not those they call): what the host issues, one
    dispatch each."""
    with torch.profiler.profile() as profiler:
        function()
    return [e.name for e in profiler.events() if e.name.startswith("aten::")
            and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]


def test_a_grown_cache_is_reordered_by_one_copy_into_one_view_of_the_spare():
    """A reorder is paid in every layer at every step, and a launch-bound GPU step takes the host's time
    (issue 48): in steady state (the spare fits) a grown cache costs two operators, index_select into an
    as_strided view of the spare's storage (six before: slice, view, slice, index_select, new_empty, set_)."""
    mixer, buffer, state = Mixer(4, 2), {}, {}
    order = torch.tensor([1, 0, 3, 3])
    with torch.no_grad():
        cache = mixer.keep_state(buffer, "prev_key", growing_cache.append(None, torch.randn(4, 2, 3, 5)), GROW)
        expected = cache[order][order][order]  # (before the reorders write into the memory they release)
        mixer._set_input_buffer(state, buffer)
        for _ in range(2):  # the first reorder allocates the spare; the second writes into the released memory
            mixer.reorder_incremental_state(state, order)
        operators = top_level_operators(lambda: mixer.reorder_incremental_state(state, order))
    assert sorted(operators) == ["aten::as_strided", "aten::index_select"]
    assert torch.equal(mixer._get_input_buffer(state)["prev_key"], expected)


def test_a_per_sentence_state_is_kept_while_the_rows_are_kept_and_copied_when_sentences_are_dropped():
    """Beam search's parents are hypotheses of the same sentence: a reorder that keeps the number of rows leaves a
    state alike within sentences as it is (no copy); one that drops a finished sentence copies the remaining
    rows into fresh memory (the state may be the caller's tensor)."""
    mixer, buffer, state = Mixer(4, 2), {}, {}
    original = mixer.keep_state(buffer, "key_padding_mask", torch.tensor([[0, 1], [0, 1], [1, 1], [1, 1]]) > 0,
                                PER_SENTENCE)
    mixer._set_input_buffer(state, buffer)
    mixer.reorder_incremental_state(state, torch.tensor([1, 1, 3, 2]))
    assert mixer._get_input_buffer(state)["key_padding_mask"] is original
    mixer.reorder_incremental_state(state, torch.tensor([2, 3]))
    kept = mixer._get_input_buffer(state)["key_padding_mask"]
    assert torch.equal(kept, original[2:]) and kept.data_ptr() != original[2:].data_ptr()


def test_an_aposnet_cross_attention_step_copies_no_state_and_reads_nothing_from_the_device():
    """aPosNet's cross-attention attends over the whole source (its energies are the keys' own): its values, key
    positions and padding are alike in a sentence's hypotheses and kept through reorders within sentences, and
    its step is a Python int, so that the positions' bounds are known on the host (issue 48: 4 state copies per
    layer and reorder, and 3 reads of the device per layer and step, before). The steps equal the teacher-forced
    pass."""
    model, _ = build_model(["--cross-mixer", "aposnet", "--decoder-layers", "2"], arch="aposnet_transformer_tiny")
    model.make_generation_fast_()
    src, src_lengths, prev = random_batch(dummy_dictionary(), [5, 7], [6, 6])[:3]
    beams = torch.arange(2).repeat_interleave(2)
    src, src_lengths, prev = src[beams], src_lengths[beams], prev[beams]
    order, cross = torch.tensor([1, 0, 3, 3]), model.decoder.layers[0].encoder_attn.mixer
    with torch.inference_mode():
        encoder_out = model.encoder(src, src_lengths)
        states = [{}, {}]
        for state in states:
            for t in range(4):
                model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        x, key = torch.randn(1, 4, cross.embed_dim), encoder_out["encoder_out"][0]
        kernels = launching_kernels(lambda: (cross.reorder_incremental_state(states[1], order), cross(
            x, key, key, key_padding_mask=encoder_out["encoder_padding_mask"][0], incremental_state=states[1],
            static_kv=True)))
        model.decoder.reorder_incremental_state_scripting(states[0], order)
        prev = prev[order]
        stepped = model.decoder(prev[:, :5], encoder_out=encoder_out, incremental_state=states[0])[0]
        forced = model.decoder(prev[:, :5], encoder_out=encoder_out)[0][:, -1:]
    assert not {"aten::index_select", "aten::_local_scalar_dense"} & set(kernels), kernels
    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)


def test_an_rposnet_cross_attention_reorder_within_sentences_copies_none_of_its_source_state():
    """rPosNet's cross-attention keeps, per sentence, its values in real-position order, their prefix and suffix
    sums, the lengths, positions and padding of the source (posnet_decoding.cache_source): alike in a sentence's
    hypotheses, since fairseq's SequenceGenerator reorders rows within their sentences and drops finished ones
    (6 copies per layer and reorder before); after the reorders the steps equal the teacher-forced pass."""
    model, _ = build_model(["--cross-mixer", "rposnet", "--length-ratio", "1.5", "--decoder-layers", "2",
                            "--posnet-max-relative", "2"],
                           arch="rposnet_transformer_tiny")
    model.make_generation_fast_()
    src, src_lengths, prev = random_batch(dummy_dictionary(), [5, 7], [6, 6])[:3]
    beams = torch.arange(2).repeat_interleave(2)
    src, src_lengths, prev = src[beams], src_lengths[beams], prev[beams]
    cross = model.decoder.layers[0].encoder_attn.mixer
    with torch.no_grad():
        encoder_out, state = model.encoder(src, src_lengths), {}
        for t in range(4):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        before = dict(cross._get_input_buffer(state))
        for order in (torch.tensor([1, 0, 3, 3]), torch.tensor([2, 3])):  # within sentences, then one dropped
            model.decoder.reorder_incremental_state_scripting(state, order)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
            prev = prev[order]
            if order.numel() == 4:
                after = cross._get_input_buffer(state)
                assert all(after[key] is before[key] for key in ("source", "prefix", "suffix", "source_lengths",
                                                                 "source_positions", "source_pad"))
        stepped = model.decoder(prev[:, :5], encoder_out=encoder_out, incremental_state=state)[0]
        forced = model.decoder(prev[:, :5], encoder_out=encoder_out)[0][:, -1:]
    torch.testing.assert_close(stepped, forced, atol=1e-5, rtol=0)
