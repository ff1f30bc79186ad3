"""mixers/prefix_decoding.py: aPosNet's and arPosNet's decoder self-attention steps from a table of weights
(folded or precomputed) equal the teacher-forced pass, through a growth of the folded tables, beam reorders and a
pad key that hands the search over to the general path; a step runs no energies, masks or softmax."""
import pytest
import torch

from fairseq_testing import build_model
from posnet_fairseq import precompute
from posnet_fairseq.benchmark.launches import launching
from posnet_fairseq.mixers.posnet import FOLD_START
from test_constant_state_decoding import decode, inputs

ATOL = 1e-5
NAMES = ["aposnet", "arposnet"]


def decoder(name):
    """(model, its first decoder self-attention mixer), ungated, K = 2 for arPosNet's relative term."""
    model = build_model(["--decoder-self-gating", "off", "--decoder-self-mixer", name, "--posnet-max-relative", "2"])[0]
    return model, model.decoder.layers[0].self_attn


def stepped_state(mixer, x, pads=None):
    """The outputs (T x B x D) and the state of decoding ``x`` step by step, the key padding mask of step t
    ``pads[t]`` (None: no mask given, as beam search decodes)."""
    state, outs = {}, []
    for t in range(x.size(0)):
        pad = None if pads is None else pads[t]
        outs.append(mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], key_padding_mask=pad, incremental_state=state)[0])
    return torch.cat(outs), mixer._get_input_buffer(state)


@pytest.mark.parametrize("name", NAMES)
def test_folded_steps_read_their_weights_and_equal_the_teacher_forced_pass_across_a_growth(name):
    model, mixer = decoder(name)
    x = inputs(FOLD_START + 20, 2, mixer.embed_dim)
    with torch.no_grad():
        forced = mixer(x, x, x)[0]
        model.make_generation_fast_()
        stepped, buffer = stepped_state(mixer, x)
    torch.testing.assert_close(stepped, forced, atol=ATOL, rtol=0)
    assert all(term.table.size(1) == 2 * FOLD_START for term in mixer.terms)  # grew past the first fold
    assert buffer["step_count"] == FOLD_START + 20 and "steps" not in buffer  # every step took the table's path
    # made for twice the positions at each step beyond them, as far as the table reaches: 256 > FOLD_START + 20
    assert buffer["step_weights"].shape == (mixer.num_heads, 2 * FOLD_START, 2 * FOLD_START)


def precomputed_steps(name, length, table, seed):
    """The mixer of ``name``'s first decoder layer in its table form (``table`` positions precomputed), its
    teacher-forced output on ``length`` x 3 inputs of ``seed`` before the folding, its steps' output after it
    and their state."""
    model, mixer = decoder(name)
    x = inputs(length, 3, mixer.embed_dim, seed=seed)
    with torch.no_grad():
        forced = mixer(x, x, x)[0]
        precompute.precompute_model_(model, table)
        mixer = model.decoder.layers[0].self_attn  # the table form
        return (mixer, x, forced, *stepped_state(mixer, x))


@pytest.mark.parametrize("name", NAMES)
def test_precomputed_steps_equal_the_teacher_forced_pass(name):
    _, _, forced, stepped, buffer = precomputed_steps(name, 30, 30, seed=1)
    torch.testing.assert_close(stepped, forced, atol=ATOL, rtol=0)
    assert "step_weights" in buffer and "steps" not in buffer


@pytest.mark.parametrize("name", NAMES)
def test_the_weights_grow_with_the_longest_step_not_with_the_tables(name):
    """A table of 1,024 positions and 20 steps: the weights are made for 32 positions (twice as many each time a
    step is beyond them: 1, 2, 4, ..., 32), not the H x 1,024 x 1,024 the table covers; a second search reads
    the same weights, and the steps equal the teacher-forced pass."""
    mixer, x, forced, stepped, buffer = precomputed_steps(name, 20, 1024, seed=5)
    weights = buffer["step_weights"]
    with torch.no_grad():
        again, buffer = stepped_state(mixer, x[:5])
    assert mixer.terms[0].table.size(1) == 1024 and weights.shape == (mixer.num_heads, 32, 32)
    assert buffer["step_weights"] is weights
    torch.testing.assert_close(stepped, forced, atol=ATOL, rtol=0)
    torch.testing.assert_close(again, forced[:5], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_beam_reorders_are_followed(name):
    """Beams permuted, duplicated and dropped: after the last reorder every step equals the teacher-forced pass
    over the reordered histories."""
    model, mixer = decoder(name)
    reorders = {7: torch.tensor([1, 0, 0, 3]), 15: torch.tensor([2, 2, 1, 0]), 22: torch.tensor([3, 1])}
    model.make_generation_fast_()
    with torch.no_grad():
        stepped, x, *_ = decode(mixer, inputs(30, 4, mixer.embed_dim, seed=2), reorders=reorders)
        forced = mixer(x, x, x)[0]
    torch.testing.assert_close(torch.cat(stepped[22:]), forced[22:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_a_pad_key_hands_the_search_over_to_the_general_path(name):
    """Steps without a mask read the table; from the first step with one (row 1 ends at step 12), the general
    path continues from the same state: the real positions equal the teacher-forced pass with that padding."""
    model, mixer = decoder(name)
    x = inputs(20, 2, mixer.embed_dim, seed=3)
    pad = torch.zeros(2, 20, dtype=torch.bool)
    pad[1, 12:] = True
    model.make_generation_fast_()
    with torch.no_grad():
        forced = mixer(x, x, x, key_padding_mask=pad)[0]
        stepped, buffer = stepped_state(mixer, x, [None] * 10 + [pad[:, t: t + 1] for t in range(10, 20)])
    real = ~pad.t().unsqueeze(-1)
    torch.testing.assert_close(stepped * real, forced * real, atol=ATOL, rtol=0)
    assert "step_count" not in buffer and buffer["key_padding_mask"].shape == (2, 20)


def test_a_folded_aposnet_step_runs_no_energies_masks_or_softmax():
    """Issue 48: the general path's step ran 25 launching operators per gated layer (the Transformer's: 10);
    an ungated folded step now runs its value projection, the cache append, the weighted sum over the prefix
    (the weights broadcast to the rows, then one batched product) and the output projection."""
    model, mixer = decoder("aposnet")
    model.make_generation_fast_()
    x = inputs(12, 4, mixer.embed_dim, seed=4)
    state = {}
    with torch.no_grad():
        for t in range(11):
            mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            mixer(x[11:], x[11:], x[11:], incremental_state=state)
    names = launching(profiler.events())
    assert not {"aten::_softmax", "aten::index", "aten::masked_fill_", "aten::arange"} & set(names), names
    assert len(names) <= 6, names
