"""Decoding caches that grow in place (posnet_fairseq/mixers/growing_cache.py).

The cache is an allocation with spare steps: appends write into it, the beam
reorder copies into the allocation the previous reorder released (kept in the
search's incremental state). The values
must be those of the ``torch.cat`` / ``index_select`` cache it replaced, bit
for bit, for every mixer that caches through ``Mixer.cache_self_attention``.
"""
import gc
import weakref

import pytest
import torch

from fairseq_testing import build_model, decode_interleaved
from posnet_fairseq.mixers import growing_cache, state_reorder
from posnet_fairseq.mixers.base import Mixer
from posnet_fairseq.mixers.growing_cache import GROWTH
from posnet_fairseq.mixers.state_reorder import GROW, GROW_PARTS
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.sites import SITE
from test_state_reorder import top_level_operators

STEPS = 2 * GROWTH + 8  # two reallocations, and steps written into spare capacity after each
CACHING = ("alibi", "aposnet", "arposnet", "kerple", "linearnet", "relattn", "rope", "shaw", "t5_bias", "tisa",
           "tisa_shaw")  # the decoder mixers that cache through Mixer.cache_self_attention


def test_append_writes_into_spare_steps_and_equals_cat():
    cache, reference, allocations = None, None, set()
    blocks = [1, 3, 1, GROWTH, 1, 5, GROWTH + 7, 2]
    for i, length in enumerate(blocks):
        steps = torch.randn(2, 3, length, 4, generator=torch.Generator().manual_seed(i))
        before = None if cache is None else (cache.data_ptr(), growing_cache.capacity(cache))
        cache = growing_cache.append(cache, steps)
        reference = steps if reference is None else torch.cat([reference, steps], dim=2)
        assert torch.equal(cache, reference)
        fits = before is not None and before[1] >= cache.size(2)
        if before is not None:  # in place exactly when the spare steps suffice
            assert (cache.data_ptr() == before[0]) == fits
        if not fits:
            assert growing_cache.capacity(cache) == cache.size(2) + GROWTH
        allocations.add(cache.data_ptr())
    assert 1 < len(allocations) < len(blocks)


def test_a_tensor_not_made_here_has_no_spare_steps():
    contiguous = torch.randn(2, 3, 5, 4)
    assert growing_cache.capacity(contiguous) == 5
    heads_last = torch.randn(2, 5, 3, 4).transpose(1, 2)  # split_heads' layout, before any append
    assert growing_cache.capacity(heads_last) == 5
    assert growing_cache.capacity(growing_cache.append(None, heads_last)) == 5 + GROWTH


def test_a_reorder_leaves_room_for_the_next_step_in_the_released_memory():
    """One copy per step: the reorder writes into the spare with one step of room, the append fills
    it in place and the cache is contiguous again; the next reorder writes into the memory this one
    released."""
    cache = growing_cache.append(None, torch.randn(4, 2, 3, 5))
    order = torch.tensor([2, 2, 0, 1])
    reordered, released = state_reorder.reorder(cache, order, None, GROW)
    assert torch.equal(reordered, cache.index_select(0, order)) and growing_cache.capacity(reordered) == 4
    assert released.untyped_storage().data_ptr() == cache.untyped_storage().data_ptr()  # its whole storage
    step = torch.randn(4, 2, 1, 5)
    appended = growing_cache.append(reordered, step)
    assert appended.data_ptr() == reordered.data_ptr() and appended.is_contiguous()
    assert torch.equal(appended, torch.cat([cache.index_select(0, order), step], dim=2))
    again, _ = state_reorder.reorder(appended, order, released, GROW)
    assert again.data_ptr() == released.data_ptr()
    assert torch.equal(again, appended.index_select(0, order))


# The key under which content attention's keys and values are cached side by side (Mixer.append_self_attention).
KEYS_AND_VALUES = "prev_key+prev_value"


def decoder_self_mixer(name):
    flags = ["--length-ratio", "1.5"] if MIXERS[name].uses_length_ratio else []
    model = build_model([SITE["decoder_self"].mixer_flag, name, "--decoder-self-gating", "off", *flags])[0]
    return model.eval().decoder.layers[0].self_attn


def decode(mixer, x, orders):
    """Step-by-step outputs of one search, reordered before every step as beam search does (beams duplicated too)."""
    return decode_interleaved(mixer, [x], [orders])[0]


def random_orders(batch, seed):
    generator = torch.Generator().manual_seed(seed)
    return {t: torch.randint(0, batch, (batch,), generator=generator) for t in range(1, STEPS)}


def concatenating_cache(monkeypatch):
    """The cache before growing_cache: torch.cat on every append, a fresh index_select on every reorder."""
    monkeypatch.setattr(growing_cache, "append",
                        lambda cache, steps: steps if cache is None else torch.cat([cache, steps], dim=-2))
    monkeypatch.setattr(Mixer, "reorder_incremental_state", plain_reorder)


def plain_reorder(self, incremental_state, new_order):
    """A fresh index_select of every per-hypothesis state; a state shared by the batch (``SHARED``: rPosNet's
    step count) has no hypothesis axis and stays as it is."""
    buffer = self._get_input_buffer(incremental_state)
    if buffer:
        self._set_input_buffer(incremental_state, {
            name: state if state is None or self._state_reorders[name].shared
            else state.index_select(self._state_reorders[name].batch, new_order)
            for name, state in buffer.items() if not name.endswith(self.SPARE)})
    return incremental_state


DECODER_SELF_MIXERS = sorted(name for name, entry in MIXERS.items() if "decoder_self" in entry.sites)


@pytest.mark.parametrize("name", DECODER_SELF_MIXERS)
def test_decoding_equals_the_concatenating_cache(name, monkeypatch):
    mixer = decoder_self_mixer(name)
    x = torch.randn(STEPS, 3, mixer.embed_dim, generator=torch.Generator().manual_seed(0))
    orders = random_orders(3, seed=1)
    grown = decode(mixer, x, orders)
    with monkeypatch.context() as patch:
        concatenating_cache(patch)
        concatenated = decode(mixer, x, orders)
    torch.testing.assert_close(grown, concatenated, atol=0, rtol=0)


@pytest.mark.parametrize("name", CACHING)
def test_the_listed_mixers_grow_their_cache(name):
    mixer = decoder_self_mixer(name)
    decode(mixer, torch.randn(3, 2, mixer.embed_dim), random_orders(2, seed=0))
    assert {GROW, GROW_PARTS} & set(mixer._state_reorders.values())


def test_the_spare_allocation_lives_in_the_search_state():
    """What a reorder released is the next reorder's spare, kept in the incremental state: it is
    written into by that reorder, and freed with the search, not held by the mixer."""
    mixer = decoder_self_mixer("rope")
    state, x = {}, torch.randn(1, 4, mixer.embed_dim)
    with torch.no_grad():
        for t in range(3):
            if t:
                mixer.reorder_incremental_state(state, torch.tensor([1, 0, 3, 3]))
            mixer(x, x, x, incremental_state=state)
    buffer = mixer._get_input_buffer(state)
    spare = buffer[KEYS_AND_VALUES + Mixer.SPARE]
    mixer.reorder_incremental_state(state, torch.tensor([0, 1, 2, 3]))
    assert mixer._get_input_buffer(state)[KEYS_AND_VALUES].data_ptr() == spare.data_ptr()
    released = weakref.ref(mixer._get_input_buffer(state)[KEYS_AND_VALUES + Mixer.SPARE])
    del state, buffer, spare
    gc.collect()
    assert released() is None


def test_interleaved_searches_each_give_what_they_give_alone():
    """Two searches on one mixer, reordered at every step and run step for step in turn: each keeps
    its own spare allocations (in its incremental state), so neither writes into the other's cache."""
    mixer = decoder_self_mixer("rope")
    xs = [torch.randn(STEPS, 4, mixer.embed_dim, generator=torch.Generator().manual_seed(s)) for s in (0, 1)]
    orders = [random_orders(4, seed=10 + s) for s in (0, 1)]
    alone = [decode(mixer, x, o) for x, o in zip(xs, orders)]
    for interleaved, single in zip(decode_interleaved(mixer, xs, orders), alone):
        torch.testing.assert_close(interleaved, single, atol=0, rtol=0)


def test_keys_and_values_are_cached_side_by_side_and_reordered_by_one_copy():
    """Content attention's key and value caches are views of one tensor: a beam reorder in steady state
    copies both with one index_select into one view of the spare and remakes the two views with one
    unbind (on main before this, six operators for each)."""
    mixer = decoder_self_mixer("rope")
    state, x = {}, torch.randn(1, 4, mixer.embed_dim)
    order = torch.tensor([1, 0, 3, 3])
    with torch.no_grad():
        for t in range(3):
            if t:
                mixer.reorder_incremental_state(state, order)
            mixer(x, x, x, incremental_state=state)
        before = {name: cache.clone() for name, cache in mixer._get_input_buffer(state).items()}  # (memory reused)
        mixer.reorder_incremental_state(state, order)  # the spare fits from the second reorder on
        operators = top_level_operators(lambda: mixer.reorder_incremental_state(state, order))
    after = mixer._get_input_buffer(state)
    assert sorted(operators) == ["aten::as_strided", "aten::index_select", "aten::unbind"]
    for index, name in enumerate(["prev_key", "prev_value"]):
        assert torch.equal(after[name], before[name][order][order])
        assert torch.equal(after[name], after[KEYS_AND_VALUES][index])
        assert after[name].untyped_storage().data_ptr() == after[KEYS_AND_VALUES].untyped_storage().data_ptr()
