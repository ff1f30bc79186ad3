"""aPosNet / rPosNet / arPosNet beyond the shared contract: the vectorized mixer equals a naive
loop over the paper's equations (8-10), the in-memory tables equal the direct computation,
and the build-time checks name their flags."""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention, PositionalEmbedding
from torch import nn

from fairseq_testing import build_model, launching_kernels, step_mixer
from posnet_fairseq.mixers.registry import MixerContext
from posnet_fairseq.sites import SITE
from posnet_fairseq.mixers.posnet import FOLD_START, APosNet, ARPosNet, RPosNet
from posnet_fairseq.mixers.position_energies import sinusoids
from posnet_fairseq.precompute import table_form

PAD = 1
DIM, HEADS = 8, 2
# The model computes gamma from the training data for any mixer that may use it;
# the dummy task has none.
GAMMA = ["--length-ratio", "1.0"]
KINDS = {"rposnet": RPosNet, "aposnet": APosNet, "arposnet": ARPosNet}


def make_mixer(kind, site, max_relative=2, gamma=1.0, learned=True, seed=0):
    torch.manual_seed(seed)
    args = argparse.Namespace(posnet_max_relative=max_relative, length_ratio=gamma, dropout=0.0,
                              attention_dropout=0.0, posnet_precomputed=0)
    positions = PositionalEmbedding(400, DIM, PAD, learned=learned)
    ctx = MixerContext(site=SITE[site], embed_dim=DIM, num_heads=HEADS, kdim=DIM, layer_idx=0, num_layers=1, args=args,
                       padding_idx=PAD, embed_positions=positions, shared=nn.ModuleDict(), length_ratio=gamma)
    mixer = KINDS[kind].build(ctx).eval()
    norm = ctx.shared["posnet_position_norm"] if mixer.relative is not None else None
    if norm is not None:  # a non-trivial LayerNorm, so that the test sees it
        nn.init.normal_(norm.weight, 1.0, 0.2)
        nn.init.normal_(norm.bias, 0.0, 0.2)
    return mixer, positions, norm


def naive(mixer, positions, norm, query, value, query_pad, key_pad):
    """Eq. 8-10 and the softmax, one (batch, head, n, m) at a time."""
    relative, absolute, Dh = mixer.relative, mixer.absolute, mixer.head_dim
    T, B, _ = query.shape
    S = value.shape[0]

    def model_position(n):  # LN(learned position embedding of 0-based position n)
        return F.layer_norm(positions.weight[PAD + 1 + n], (DIM,), norm.weight, norm.bias, norm.eps)

    def sinusoid(n):
        return sinusoids(n + 1, DIM)[n]

    def real_position(pad_row, index):
        return int((~pad_row[: index + 1]).sum()) - 1

    v = mixer.v_proj(value)
    out = torch.zeros(T, B, DIM)
    for b in range(B):
        for t in range(T):
            if query_pad is not None and query_pad[b, t]:
                continue
            n = t if mixer.site is not SITE["encoder_self"] else real_position(query_pad[b], t)
            heads = []
            for h in range(HEADS):
                sl = slice(h * Dh, (h + 1) * Dh)
                energies, keys = [], []
                for s in range(S):
                    if key_pad[b, s] or (mixer.site.causal and s > t):
                        continue
                    m = real_position(key_pad[b], s)
                    e = 0.0
                    if relative is not None:
                        K, gamma = relative.max_relative, relative.length_ratio
                        q = relative.q_proj(model_position(n))
                        slot = max(-K, min(K, m - math.floor(gamma * n))) + K
                        e += torch.dot(q[sl], relative.keys[slot, sl])
                    if absolute is not None:
                        q, k = absolute.q_proj(sinusoid(n)), absolute.k_proj(sinusoid(m))
                        e += torch.dot(q[sl], k[sl])
                    energies.append(e / math.sqrt(Dh))
                    keys.append(s)
                weights = torch.softmax(torch.stack(energies), dim=0)
                heads.append(sum(w * v[s, b, sl] for w, s in zip(weights, keys)))
            out[t, b] = mixer.out_proj(torch.cat(heads))
    return out


def left_pad(lengths, width):
    return torch.tensor([[i < width - n for i in range(width)] for n in lengths])


def right_pad(lengths, width):
    return torch.tensor([[i >= n for i in range(width)] for n in lengths])


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("max_relative", [2, 40], ids=["K<len", "K>len"])
@pytest.mark.parametrize("site", ["encoder_self", "decoder_self", "cross"])
def test_vectorized_equals_naive_loop(kind, max_relative, site):
    gamma = 1.5 if site == "cross" else 1.0
    mixer, positions, norm = make_mixer(kind, site, max_relative, gamma)
    g = torch.Generator().manual_seed(1)
    T, S = 7, 9 if site == "cross" else 7
    query = torch.randn(T, 3, DIM, generator=g)
    value = torch.randn(S, 3, DIM, generator=g) if site == "cross" else query
    if site == "encoder_self":
        key_pad = left_pad([7, 4, 2], T)
        query_pad = key_pad
    elif site == "decoder_self":
        key_pad = right_pad([7, 5, 3], T)
        query_pad = key_pad
    else:
        key_pad, query_pad = left_pad([9, 6, 2], S), right_pad([7, 5, 3], T)
    with torch.no_grad():
        out, _ = mixer(query, value, value, key_padding_mask=key_pad, static_kv=site == "cross")
        expected = naive(mixer, positions, norm, query, value, query_pad, key_pad)
    real = ~query_pad.t()
    torch.testing.assert_close(out[real], expected[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_rposnet_clipping_shares_the_outer_slots(kind):
    """Distances beyond +-K reuse the outermost table row: attention stays global (no window)."""
    mixer, _, _ = make_mixer(kind, "encoder_self", max_relative=1)
    positions = torch.arange(12).unsqueeze(0)
    x = torch.randn(12, 1, DIM)
    with torch.no_grad():
        weights = mixer(x, x, x, need_head_weights=True)[1]  # H x B x T x S, as the mixer applies them
    assert (weights > 0).all()  # a window of +-K would give the keys 2 and more away no weight
    if kind == "rposnet":  # query 0: keys 1..11 are all beyond K = 1 to the right -> one slot
        row = mixer.energies(positions, positions)[0, :, 0]
        torch.testing.assert_close(row[:, 2:], row[:, 2:3].expand(-1, 10))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("site", ["encoder_self", "cross"])
def test_in_memory_tables_equal_direct_computation_and_grow(kind, site):
    """make_generation_fast_ folds the energies into tables; longer inputs grow them."""
    mixer, _, _ = make_mixer(kind, site, gamma=1.5 if site == "cross" else 1.0)
    query_pos = torch.arange(FOLD_START + 20).unsqueeze(0)
    key_pos = torch.arange(FOLD_START + 30).unsqueeze(0)
    with torch.no_grad():
        direct = mixer.energies(query_pos, key_pos)
        mixer.make_generation_fast_()
        folded = mixer.energies(query_pos, key_pos)
    torch.testing.assert_close(folded, direct, atol=1e-5, rtol=0)
    assert all(term.table.size(1) == 2 * FOLD_START for term in mixer.terms)  # grew by doubling
    assert not [key for key in mixer.state_dict() if "table" in key or "energy" in key]


@pytest.mark.parametrize("max_relative", [0, 2])
def test_folded_rposnet_decodes_as_it_trains_across_a_growth_of_its_table(max_relative):
    """A decoder self-attention step reads its energies from rows made once per table (in the ring's order,
    scaled); past the folded table the table grows and the rows are made again from the new one."""
    mixer, _, _ = make_mixer("rposnet", "decoder_self", max_relative=max_relative)
    x = torch.randn(FOLD_START + 8, 3, DIM, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = mixer(x, x, x)[0]
        mixer.make_generation_fast_()
        decoded, state = step_mixer(mixer, x)
    relative = mixer.relative
    assert relative.table.size(1) == 2 * FOLD_START and relative.decoding_rows.holds(relative.table)
    assert int(mixer._get_input_buffer(state)["step_count"]) == FOLD_START + 8
    torch.testing.assert_close(decoded, expected, atol=1e-5, rtol=0)


def test_precomputed_rposnet_decodes_from_a_table_loaded_in_place_after_decoding():
    """The decoding rows are made anew when the table is written in place (load_state_dict copies into the
    same tensor at the same address, so a cache keyed by the table's address, dtype and shape would decode
    with the old table's rows)."""
    first, second = (table_form(make_mixer("rposnet", "decoder_self", seed=seed)[0], 16) for seed in (0, 1))
    x = torch.randn(12, 3, DIM, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = step_mixer(first, x)[0]
        address = first.relative.table.data_ptr()
        first.load_state_dict(second.state_dict())
        assert first.relative.table.data_ptr() == address
        after = step_mixer(first, x)[0]
        expected = second(x, x, x)[0]
    assert not torch.allclose(before, expected, atol=1e-3)
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_precomputed_mixer_refuses_longer_inputs_naming_the_limit(kind):
    mixer, _, _ = make_mixer(kind, "encoder_self")
    x = torch.randn(10, 1, DIM)
    with torch.no_grad():
        before = mixer(x, x, x)[0]
        mixer = table_form(mixer, 10)
        assert all(not term.projections() for term in mixer.terms)
        assert not [key for key in mixer.state_dict() if "proj" in key and not key.startswith(("v_proj", "out_proj"))]
        assert mixer.relative is None or (mixer.relative.keys is None and mixer.relative.positions is None)
        torch.testing.assert_close(mixer(x, x, x)[0], before, atol=1e-5, rtol=0)
        y = torch.randn(11, 1, DIM)
        with pytest.raises(ValueError, match="precomputed for 10 positions"):
            mixer(y, y, y)
    assert mixer.max_positions() == 10


def test_rposnet_without_position_embeddings_fails_at_build_naming_the_flag():
    with pytest.raises(ValueError, match="--no-token-positional-embeddings.*--encoder-learned-pos"):
        build_model(["--encoder-self-mixer", "rposnet", "--no-token-positional-embeddings", *GAMMA])


def test_cross_rposnet_needs_a_positive_length_ratio():
    with pytest.raises(ValueError, match="--length-ratio: rposnet cross-attention needs the length ratio"):
        make_mixer("rposnet", "cross", gamma=None)
    with pytest.raises(ValueError, match="--length-ratio 0.0: must be a positive number"):
        build_model(["--cross-mixer", "rposnet", "--length-ratio", "0"])


def test_bad_max_relative_fails_at_build():
    with pytest.raises(ValueError, match="--posnet-max-relative -1"):
        build_model(["--encoder-self-mixer", "rposnet", "--posnet-max-relative", "-1", *GAMMA])


def test_presets_use_the_papers_settings():
    model, _ = build_model(GAMMA, arch="rposnet_transformer_tiny")
    layer = model.encoder.layers[0].self_attn
    assert type(layer).__name__ == "GatedMixer" and isinstance(layer.mixer, RPosNet)
    assert type(model.decoder.layers[0].encoder_attn).__name__ == "MultiheadAttention"  # cross: plain MHA
    assert layer.mixer.relative.max_relative == 16
    assert type(model.encoder.embed_positions).__name__ == "LearnedPositionalEmbedding"
    big, _ = build_model(GAMMA, arch="rposnet_transformer_big")
    assert big.encoder.layers[0].self_attn.mixer.relative.max_relative == 8
    ungated, _ = build_model(["--encoder-self-gating", "off"], arch="aposnet_transformer_tiny")
    assert isinstance(ungated.encoder.layers[0].self_attn, APosNet)
    assert type(ungated.decoder.layers[0].self_attn).__name__ == "GatedMixer"


def encoder_step(model, src, lengths):
    """The encoder's training output and the gradients of its parameters."""
    model.zero_grad()
    out = model.encoder(src, lengths)["encoder_out"][0]
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), {name: p.grad.clone() for name, p in model.encoder.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_the_layers_of_a_call_share_their_position_work_with_the_outputs_and_gradients_of_their_own(
        monkeypatch, arch, fused):
    """Positions, index grids, masks, rPosNet's LayerNorm'd positions and in training the layers'
    energies (issue 48; posnet_layers.py), with fused attention their mask, are made once per call for every
    layer; without dropout, the encoder's output and every gradient are those of each layer making its own."""
    from posnet_fairseq.mixers.posnet import PositionAttention

    monkeypatch.setattr(PositionAttention, "FUSED", ("cpu",) if fused else ())
    torch.manual_seed(0)
    model, _ = build_model(["--dropout", "0", "--attention-dropout", "0"], arch=arch)
    src = torch.tensor([[1, 5, 6, 7, 2], [1, 1, 8, 9, 2]])  # the second sentence left-padded (pad = 1)
    lengths = torch.tensor([5, 4])
    context = model.encoder.forward_context
    makes, shared = [], context.shared
    context.shared = lambda key, make, anchor=None: shared(key, lambda: makes.append(key) or make(), anchor)
    model.train()
    out, grads = encoder_step(model, src, lengths)
    assert len(makes) == len(set(makes))  # each made once, for both layers
    assert "posnet_layer_energies" in {key[0] for key in makes}
    for module in model.encoder.modules():
        if isinstance(module, PositionAttention):
            module.forward_context, module.side_layers = None, ()
            if module.relative is not None:
                module.relative.positions.forward_context = None
    own_out, own_grads = encoder_step(model, src, lengths)
    torch.testing.assert_close(out, own_out)
    assert grads.keys() == own_grads.keys() and any("q_proj" in name for name in grads)
    for name, grad in grads.items():  # fp32 rounding of sums in another order, relative to the gradient's size
        expected = own_grads[name]
        torch.testing.assert_close(grad, expected, atol=1e-5 + 1e-6 * float(expected.abs().max()), rtol=1.3e-6)


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_a_padded_training_call_of_the_layers_reads_nothing_from_the_device(arch, causal):
    """Issue 48: a read of a device tensor's value (``int(tensor)``, ``.item()``) stalls a GPU's queue, and a
    launch-bound step then waits for all of it. The layers of a padded teacher-forced training call read none:
    their positions are bounded by the length, which the host knows (on main before, one read per side)."""
    from posnet_fairseq.benchmark.launches import HOST_READS
    from posnet_fairseq.mixers.posnet import PositionAttention

    model, _ = build_model(["--dropout", "0"], arch=arch)
    side = model.decoder if causal else model.encoder
    mixers = [m for m in side.modules() if isinstance(m, PositionAttention) and not m.site.cross]
    model.train()
    x = torch.randn(5, 2, mixers[0].embed_dim)
    pad = torch.tensor([[False] * 5, [True, False, False, False, False]])  # left-padded, as fairseq pads sources
    pad = pad.flip(1) if causal else pad  # right-padded, as fairseq pads targets
    with side.forward_context.call(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        sum(mixer(x, x, x, key_padding_mask=pad)[0].sum() for mixer in mixers).backward()
    assert len(mixers) == 2 and mixers[0].side_layers == mixers
    assert not {event.name for event in p.events()} & HOST_READS


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
def test_the_layers_energies_made_at_once_draw_each_layers_own_position_dropout(arch):
    """The layers' position vectors are dropped out once for all, each layer with its own draw: two layers with
    the same parameters get different energies in training, the same without dropout."""
    from posnet_fairseq.mixers.posnet import PositionAttention
    from posnet_fairseq.mixers.posnet_layers import stacked_table

    model, _ = build_model(["--dropout", "0.3"], arch=arch)
    mixers = [m for m in model.encoder.modules() if isinstance(m, PositionAttention)]
    assert len(mixers) == 2 and mixers[0].side_layers == mixers
    terms = [mixer.terms[0] for mixer in mixers]
    terms[1].load_state_dict(terms[0].state_dict())
    for dropout in (0.3, 0.0):
        for term in terms:  # rPosNet's model positions, aPosNet's sinusoids
            setattr(*((term.positions, "dropout") if hasattr(term, "positions") else (term, "position_dropout")),
                    dropout)
        first, second = stacked_table(terms, 0, 5, 5, 1.0).chunk(2)
        assert torch.equal(first, second) == (dropout == 0.0)


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_the_layers_of_a_training_call_take_one_softmax_and_one_dropout_for_all(arch, causal):
    """Issue 48: on the explicit path (the CPU's) the layers of a training call take their attention weights
    from one masked softmax and one dropout of every layer's energies (posnet_layers.every_layer), not one
    each; each layer and sentence draws its own dropout."""
    from posnet_fairseq.mixers import posnet_layers
    from posnet_fairseq.mixers.posnet import PositionAttention

    model, _ = build_model(["--attention-dropout", "0.5"], arch=arch)
    side = model.decoder if causal else model.encoder
    mixers = [m for m in side.modules() if isinstance(m, PositionAttention) and not m.site.cross]
    model.train()
    x = torch.randn(5, 2, mixers[0].embed_dim)
    pad = torch.tensor([[False] * 5, [True, False, False, False, False]])
    pad = pad.flip(1) if causal else pad  # right-padded targets, left-padded sources
    with side.forward_context.call(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        sum(mixer(x, x, x, key_padding_mask=pad)[0].sum() for mixer in mixers).backward()
    names = [event.name for event in p.events()]
    # (two dropouts: of every layer's position vectors, posnet_layers.stacked_table, and of their weights)
    assert len(mixers) == 2 and names.count("aten::_softmax") == 1 and names.count("aten::dropout") == 2
    with side.forward_context.call():
        kept = [posnet_layers.layer_attention(mixer, pad, 2, 5, x.device) != 0 for mixer in mixers]
    assert kept[0].shape == (2, mixers[0].num_heads, 5, 5)
    assert not torch.equal(kept[0], kept[1]) and not torch.equal(kept[0][0], kept[0][1])


@pytest.mark.parametrize("max_relative,dtype,int8,atol", [(0, torch.float32, False, 1e-5),
                                                          (2, torch.float32, False, 1e-5),
                                                          (2, torch.bfloat16, False, 1e-2),
                                                          (2, torch.float32, True, 1e-2)])
def test_folded_rposnet_decoding_takes_a_pad_after_steps_without_pads(max_relative, dtype, int8, atol):
    """Steps without pads attend with the table's precomputed weights, their state one ring and no counts; a
    later step with a pad continues from the ring taken apart and counts made from the step, as a mixer that
    decoded every step with its counts does. ``int8``: the mixer told that its model is int8 (its ring fp16, the
    tail's sum fp32 again once taken apart; atol as bf16's: fp16 rounds the values to 2^-11 of their size)."""
    mixer, _, _ = make_mixer("rposnet", "decoder_self", max_relative=max_relative)
    mixer.to(dtype)  # (bf16: the ring is fp32, the general path's window bf16)
    if int8:
        mixer.int8_()
    x = torch.randn(9, 3, DIM, generator=torch.Generator().manual_seed(1)).to(dtype)
    pads = torch.zeros(3, 9, dtype=torch.bool)
    pads[1, 6:] = True  # the second row ends at 6
    with torch.no_grad():
        general, general_state = [], {}
        for t in range(9):  # not folded: every step computes its energies and counts
            general.append(mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], key_padding_mask=pads[:, t: t + 1],
                                 incremental_state=general_state)[0])
        mixer.make_generation_fast_()
        folded, state = [], {}
        for t in range(9):
            pad = pads[:, t: t + 1] if pads[:, t].any() else None
            folded.append(mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], key_padding_mask=pad,
                                incremental_state=state)[0])
            buffer = mixer._get_input_buffer(state)
            assert ("counts" in buffer) == (t >= 6) and ("ring" in buffer) == (t < 6)
            if t < 6:
                assert buffer["ring"].dtype == (torch.float16 if int8 else torch.float32)
            else:
                assert buffer["tail"].dtype == torch.float32
    torch.testing.assert_close(torch.cat(folded), torch.cat(general), atol=atol, rtol=0)


def test_folded_rposnet_decoding_step_launches_fewer_operators_than_multihead_attention():
    """Issue 48: on a GPU a decoding step is bound by kernel launches. A step of rPosNet's decoder
    self-attention, folded as fairseq-generate prepares it, launches fewer operators (counted on the CPU)
    than a step of fairseq's MultiheadAttention, which it replaces in the Transformer."""
    rposnet, _, _ = make_mixer("rposnet", "decoder_self")
    rposnet.make_generation_fast_()
    mha = MultiheadAttention(DIM, HEADS, self_attention=True).eval()
    x = torch.randn(7, 4, DIM)
    counts = {}
    for name, mixer in (("rposnet", rposnet), ("mha", mha)):
        with torch.inference_mode():
            state = step_mixer(mixer, x[:6])[1]
            counts[name] = len(launching_kernels(lambda: mixer(x[6:], x[6:], x[6:], incremental_state=state)))
    assert counts["rposnet"] < counts["mha"], counts


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("padded", [False, True])
def test_training_energies_have_no_sorting_gradient(kind, padded):
    """Issue 48: an indexed read's gradient (index_put with accumulation) sorts its indices, several kernels per
    layer on a GPU; the energies are read from their table with index_select and gather (or, without pads, by
    slicing), whose gradients are sums. Forward and backward of a teacher-forced call run no index_put."""
    mixer, _, _ = make_mixer(kind, "encoder_self")
    mixer.train()
    x = torch.randn(9, 3, DIM, requires_grad=True)
    pad = torch.zeros(3, 9, dtype=torch.bool)
    pad[1, :4] = padded  # left-padded, as fairseq pads sources
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        mixer(x, x, x, key_padding_mask=pad if padded else None)[0].sum().backward()
    names = {e.name for e in profiler.events()}
    assert not names & {"aten::index_put_", "aten::_index_put_impl_", "aten::sort"}, names
    assert all(p.grad is not None for term in mixer.terms for p in term.parameters())


@pytest.mark.parametrize("arch", ["rposnet_transformer_tiny", "aposnet_transformer_tiny"])
def test_a_posnet_layer_adds_no_more_training_operators_than_a_transformer_layer(arch):
    """Issue 48: with the energies of every layer made at once (posnet_layers.py), a PosNet layer's share of a
    training step is at most a Transformer layer's, in leaf operators (kernel launches on a GPU): counted as
    the step's growth from 2 to 4 encoder and decoder layers (on main before posnet_layers.py, 659 and 677
    operators per rPosNet and aPosNet layer against the Transformer's 622)."""
    from posnet_fairseq.benchmark import op_counts

    tiny = ["--size", "tiny", "--vocab", "64", "--train-batch", "2", "--train-length", "8"]

    def per_layer(name):
        counts = [op_counts.training_step_ops(name, op_counts.parse_args(
            [*tiny, "--", "--encoder-layers", str(n), "--decoder-layers", str(n)])) for n in (2, 4)]
        return (counts[1] - counts[0]) / 4

    assert per_layer(arch) <= per_layer("posnet_transformer_tiny")
