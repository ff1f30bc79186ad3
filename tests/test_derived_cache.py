"""derived_cache.DerivedCache: a value made from a tensor is made anew when the tensor is replaced or written in
place, and kept otherwise; HC-SA's ring weights follow its offsets through it."""
import torch

from posnet_fairseq.mixers import hc_decoding
from posnet_fairseq.mixers.derived_cache import DerivedCache
from posnet_fairseq.mixers.hc_gaussian import HardCodedSelfAttention


def made_counter(source):
    calls = []

    def make():
        calls.append(1)
        return source.sum().item()

    return calls, make


def test_a_value_is_kept_while_its_tensor_is_unchanged_and_made_per_extra_key():
    source, cache = torch.arange(6.0), DerivedCache()
    calls, make = made_counter(source)
    assert cache.get(source, make) == cache.get(source, make) == 15.0
    cache.get(source, make, extra="other")
    assert len(calls) == 2


def test_an_in_place_write_at_the_same_address_makes_the_value_anew():
    source, cache = torch.arange(6.0), DerivedCache()
    cache.get(source, lambda: source.sum().item())
    address = source.data_ptr()
    source.mul_(2.0)  # same tensor, address, dtype and shape: only the version counter tells
    assert source.data_ptr() == address and not cache.holds(source)
    assert cache.get(source, lambda: source.sum().item()) == 30.0


def test_a_module_conversion_that_swaps_a_parameters_data_makes_the_value_anew():
    module = torch.nn.Linear(3, 2)
    weight, cache = module.weight, DerivedCache()
    cache.get(weight, lambda: weight.sum().item())
    module.double()
    module.float()  # the same Parameter object, its version unchanged, its data a new tensor
    assert module.weight is weight and not cache.holds(weight)
    assert cache.get(weight, lambda: 1.0) == 1.0


def test_a_value_made_from_several_tensors_is_made_anew_when_any_of_them_changes():
    module = torch.nn.Linear(3, 2)
    cache, sources = DerivedCache(), tuple(module.parameters())
    assert cache.get(sources, lambda: 1.0) == cache.get(sources, lambda: 2.0) == 1.0
    with torch.no_grad():
        module.bias.add_(1.0)  # the second source only
    assert not cache.holds(sources) and cache.get(sources, lambda: 3.0) == 3.0
    assert not cache.holds(sources[:1])  # another set of sources
    assert DerivedCache().get((), lambda: 4.0) == 4.0  # no source (a bias without parameters): kept for good


def test_hc_gaussian_ring_weights_follow_an_in_place_write_of_the_offsets():
    """A dict keyed by (device, dtype) alone would keep the weights of the old offsets."""
    mixer = HardCodedSelfAttention(16, 2, [-1.0, 0.0], 1.0, "gaussian", False, True, max_length=64).eval()
    before = mixer._ring_weights(torch.device("cpu"), torch.float32)
    with torch.no_grad():
        mixer.offsets.copy_(torch.tensor([0.0, -2.0]))
    after = mixer._ring_weights(torch.device("cpu"), torch.float32)
    expected = hc_decoding.rotated_weights(mixer._causal_weights(0, mixer.window))
    assert not torch.equal(before, expected)
    torch.testing.assert_close(after, expected, atol=0, rtol=0)


def test_an_inference_tensor_is_cached_by_identity_and_a_replacement_makes_the_value_anew():
    """A table made (grown) under torch.inference_mode has no version counter: reading it raised."""
    with torch.inference_mode():
        source = torch.arange(6.0)
    cache = DerivedCache()
    calls, make = made_counter(source)
    assert cache.get(source, make) == cache.get(source, make) == 15.0 and len(calls) == 1
    with torch.inference_mode():
        grown = torch.arange(8.0)
    assert not cache.holds(grown)
    assert cache.get(grown, lambda: grown.sum().item()) == 28.0


def test_a_growing_value_is_kept_while_it_fits_and_grown_from_itself_until_its_tensor_changes():
    """``DerivedCache.grow``: a value that its readers ask more of as they go (aPosNet's causal weights, grown as
    the steps reach further) is kept while it fits the reader, and otherwise remade from the one kept, in its
    place; from nothing once its tensor has changed."""
    source, cache, grown_from = torch.arange(6.0), DerivedCache(), []

    def at_least(n):  # grown to twice the kept value, or to n where that is more
        def make(kept):
            grown_from.append(kept)
            return n if kept is None else max(n, 2 * kept)

        return cache.grow(source, lambda kept: kept >= n, make)

    assert at_least(1) == at_least(1) == 1 and at_least(2) == 2 and at_least(3) == 4 and at_least(2) == 4
    assert at_least(9) == 9 and grown_from == [None, 1, 2, 4]
    cache.get(source, lambda: "other", extra="other")  # a value of another key: the growing one kept
    assert at_least(5) == 9
    source.add_(1.0)
    assert at_least(1) == 1 and grown_from[-1] is None
