"""Constant-cost decoding of the clipped relative-position mixers (docs/constant-cost-decoding.md).

rPosNet (decoder self-attention and cross-attention, also folded and
precomputed), AppTek's LightConv (window and global context) and hard-coded
Gaussian self-attention decode with a state whose size does not depend on the
step. For each, step-by-step decoding up to 1024 tokens, with K below and
above the length, must equal (fp32, <= 1e-5) both the teacher-forced pass and
a naive decoder written here that attends over the whole cached prefix, with
one weight per key, as the mixers did before; beam reordering in the middle
of a sentence must be followed. arPosNet keeps its cache (its absolute energies
are not Toeplitz): its state grows, and a test says so.
"""
import math

import pytest
import torch

from fairseq_testing import build_model, decode_interleaved
from posnet_fairseq import precompute
from posnet_fairseq.mixers.hc_gaussian import HardCodedSelfAttention

ATOL = 1e-5
LONG = 1024


def state_size(state):
    """Total elements of every tensor in an incremental state (a step count is a Python int)."""
    return sum(t.numel() for buffer in state.values() for t in buffer.values() if isinstance(t, torch.Tensor))


def assert_constant(sizes):
    """The state has as many elements at step 5 as at step 500 (or the last step) and at the end."""
    assert sizes[4] == sizes[min(499, len(sizes) - 1)] == sizes[-1] > 0


def decoder_mixer(flags):
    return build_model(["--decoder-self-gating", "off", *flags])[0].decoder.layers[0].self_attn


def cross_mixer(flags):
    model = build_model(["--cross-gating", "off", "--length-ratio", "1.5", "--cross-mixer", *flags])[0]
    return model.decoder.layers[0].encoder_attn


def inputs(length, batch, dim, seed=0):
    return torch.randn(length, batch, dim, generator=torch.Generator().manual_seed(seed))


def right_pad(length, batch, short):
    """B x T mask: row 1 of the batch ends after ``short`` real tokens."""
    pad = torch.zeros(batch, length, dtype=torch.bool)
    pad[1, short:] = True
    return pad


def left_pad(length, batch, short):
    pad = torch.zeros(batch, length, dtype=torch.bool)
    pad[1, : length - short] = True
    return pad


def decode(mixer, x, pad=None, enc=None, enc_pad=None, reorders=None, sizes=None):
    """Step-by-step outputs (T x B x D, or a list of steps when beams were dropped); ``reorders`` {step: order} reorders the state and the
    inputs before that step, as beam search does; ``sizes`` collects the state size per step."""
    state, outs = {}, []
    x = x.clone()
    for t in range(x.size(0)):
        if reorders and t in reorders:
            order = reorders[t]
            mixer.reorder_incremental_state(state, order)
            x = x[:, order]
            pad = None if pad is None else pad[order]
            enc = None if enc is None else enc[:, order]
            enc_pad = None if enc_pad is None else enc_pad[order]
        if enc is None:
            step = mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state,
                         key_padding_mask=None if pad is None else pad[:, t: t + 1])[0]
        else:
            step = mixer(x[t: t + 1], enc, enc, key_padding_mask=enc_pad, incremental_state=state, static_kv=True)[0]
        outs.append(step)
        if sizes is not None:
            sizes.append(state_size(state))
    if len({o.size(1) for o in outs}) == 1:
        outs = torch.cat(outs)
    return outs, x, pad, enc, enc_pad


def attend(mixer, logits, v, invalid):
    """The naive cached step: softmax over one energy per key (B x H x S), invalid keys excluded."""
    logits = logits.masked_fill(invalid, float("-inf"))
    probs = torch.softmax(logits, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhs,bhsd->bhd", probs, v)


def naive_rposnet_self(mixer, x, pad):
    T, B, _ = x.shape
    k = mixer.relative.max_relative
    v = mixer.split_heads(mixer.v_proj(x))
    table = mixer.term_energies(mixer.relative, 0, T) * mixer.scaling  # H x T x (2K+1)
    outs = []
    for n in range(T):
        slot = (torch.arange(n + 1) - n).clamp(-k, k) + k
        logits = table[:, n, slot].unsqueeze(0).expand(B, -1, -1)
        outs.append(attend(mixer, logits, v[:, :, : n + 1], pad[:, None, : n + 1]))
    return mixer.merge_heads(torch.stack(outs, dim=2))


def naive_rposnet_cross(mixer, x, enc, enc_pad):
    T, B, _ = x.shape
    k, gamma = mixer.relative.max_relative, mixer.relative.length_ratio
    v = mixer.split_heads(mixer.v_proj(enc))
    positions = (torch.cumsum((~enc_pad).long(), dim=1) - 1).clamp(min=0)  # left padding: real positions
    table = mixer.term_energies(mixer.relative, 0, T) * mixer.scaling
    outs = []
    for n in range(T):
        slot = (positions - math.floor(gamma * n)).clamp(-k, k) + k  # B x S
        logits = table[:, n][:, slot].permute(1, 0, 2)  # B x H x S
        outs.append(attend(mixer, logits, v, enc_pad[:, None]))
    return mixer.merge_heads(torch.stack(outs, dim=2))


def naive_lightconv(mixer, x, pad):
    T, B, _ = x.shape
    k = mixer.max_relative
    v = mixer.split_heads(mixer.v_proj(x))
    outs = []
    for n in range(T):
        distance = torch.arange(n + 1) - n
        logits = mixer.weight[:, distance.clamp(-k, k) + k].unsqueeze(0).expand(B, -1, -1)
        invalid = pad[:, None, : n + 1]
        if not mixer.global_context:
            invalid = invalid | (distance.abs() > k)
        outs.append(attend(mixer, logits, v[:, :, : n + 1], invalid))
    return mixer.merge_heads(torch.stack(outs, dim=2))


def naive_hc_self(mixer, x, pad):
    """Raw pdf weights in float64 from the paper's formula (no softmax), over the whole prefix."""
    T, B, _ = x.shape
    v = mixer.split_heads(mixer.v_proj(x)).masked_fill(pad[:, None, :, None], 0.0).double()
    outs = []
    for n in range(T):
        d = (torch.arange(n + 1) - n).double().view(1, -1) - mixer.offsets.double().view(-1, 1)  # H x (n+1)
        w = torch.exp(-0.5 * (d / mixer.sigma) ** 2) / (mixer.sigma * math.sqrt(2 * math.pi))
        if mixer.kernel == "conv":
            w = w * ((d >= -1.5) & (d < 1.5))
        elif mixer.kernel == "index":
            w = ((d >= -0.5) & (d < 0.5)).double()
        outs.append(torch.einsum("hs,bhsd->bhd", w, v[:, :, : n + 1]))
    return mixer.merge_heads(torch.stack(outs, dim=2).float())


def check_self(mixer, naive, length, batch=2):
    x = inputs(length, batch, mixer.embed_dim)
    pad = right_pad(length, batch, length - 7)
    sizes = []
    with torch.no_grad():
        stepped = decode(mixer, x, pad, sizes=sizes)[0]
        forced = mixer(x, x, x, key_padding_mask=pad)[0]
        reference = naive(mixer, x, pad)
    # Teacher-forced, a pad query takes position 0 (real_positions); only real queries are compared.
    real = ~pad.t().unsqueeze(-1)
    torch.testing.assert_close(stepped * real, forced * real, atol=ATOL, rtol=0)
    torch.testing.assert_close(stepped, reference, atol=ATOL, rtol=0)
    return sizes


# --- rPosNet ------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, length", [(0, 64), (3, LONG), (40, LONG), (1100, LONG)], ids=str)
def test_rposnet_self_attention_decodes_exactly_in_constant_state(k, length):
    mixer = decoder_mixer(["--decoder-self-mixer", "rposnet", "--posnet-max-relative", str(k)])
    sizes = check_self(mixer, naive_rposnet_self, length)
    assert_constant(sizes)


@pytest.mark.parametrize("k, src, length", [(0, 50, 80), (4, 700, LONG), (1100, 300, LONG)], ids=str)
def test_rposnet_cross_attention_decodes_exactly_from_prefix_sums(k, src, length):
    """Left-padded sources of two lengths; gamma = 1.5 so the anchor runs past the source's end."""
    mixer = cross_mixer(["rposnet", "--posnet-max-relative", str(k)])
    x = inputs(length, 2, mixer.embed_dim)
    enc = inputs(src, 2, mixer.embed_dim, seed=1)
    enc_pad = left_pad(src, 2, src // 3)
    sizes = []
    with torch.no_grad():
        stepped = decode(mixer, x, enc=enc, enc_pad=enc_pad, sizes=sizes)[0]
        forced = mixer(x, enc, enc, key_padding_mask=enc_pad, static_kv=True)[0]
        reference = naive_rposnet_cross(mixer, x, enc, enc_pad)
    torch.testing.assert_close(stepped, forced, atol=ATOL, rtol=0)
    torch.testing.assert_close(stepped, reference, atol=ATOL, rtol=0)
    assert_constant(sizes)


def test_rposnet_cross_attention_returns_the_teacher_forced_weights():
    """fairseq asks the last layer's cross-attention for its weights (alignments) while decoding."""
    mixer = cross_mixer(["rposnet", "--posnet-max-relative", "3"])
    x, enc = inputs(40, 2, mixer.embed_dim), inputs(30, 2, mixer.embed_dim, seed=1)
    enc_pad = left_pad(30, 2, 11)
    state = {}
    with torch.no_grad():
        forced = mixer(x, enc, enc, key_padding_mask=enc_pad, static_kv=True, need_head_weights=True)[1]
        stepped = torch.cat([mixer(x[t: t + 1], enc, enc, key_padding_mask=enc_pad, incremental_state=state,
                                   static_kv=True, need_head_weights=True)[1] for t in range(40)], dim=2)
    torch.testing.assert_close(stepped, forced, atol=1e-6, rtol=0)
    assert stepped[:, 1, :, : 30 - 11].abs().max() == 0  # pads get nothing


@pytest.mark.parametrize("form", ["folded", "precomputed"])
def test_folded_and_precomputed_rposnet_decode_in_constant_state(form):
    """make_generation_fast_ (fairseq-generate) and posnet-precompute tables take the same fast path."""
    model = build_model(["--posnet-max-relative", "5", "--decoder-self-gating", "off"],
                        arch="rposnet_transformer_tiny")[0]
    mixer = model.decoder.layers[0].self_attn
    x = inputs(LONG, 2, mixer.embed_dim)
    pad = right_pad(LONG, 2, LONG - 7)
    with torch.no_grad():
        forced = mixer(x, x, x, key_padding_mask=pad)[0]
        reference = naive_rposnet_self(mixer, x, pad)
    if form == "folded":
        model.make_generation_fast_()
        assert mixer.folded and mixer.relative.table is not None
    else:
        precompute.precompute_model_(model, LONG)
        mixer = model.decoder.layers[0].self_attn  # the table form replaced the trained mixer
        assert mixer.relative.q_proj is None and mixer.relative.table.size(1) == LONG
    sizes = []
    with torch.no_grad():
        stepped = decode(mixer, x, pad, sizes=sizes)[0]
    real = ~pad.t().unsqueeze(-1)
    torch.testing.assert_close(stepped * real, forced * real, atol=ATOL, rtol=0)
    torch.testing.assert_close(stepped, reference, atol=ATOL, rtol=0)
    assert_constant(sizes)


def test_arposnet_keeps_its_cache():
    """Absolute energies give every key its own weight: arPosNet's state grows with the prefix."""
    mixer = decoder_mixer(["--decoder-self-mixer", "arposnet", "--posnet-max-relative", "2"])
    sizes = []
    with torch.no_grad():
        decode(mixer, inputs(12, 2, mixer.embed_dim), sizes=sizes)
    assert sizes[-1] > sizes[4]


# --- AppTek LightConv ---------------------------------------------------------------------------

@pytest.mark.parametrize("global_context", [False, True], ids=["window", "global"])
@pytest.mark.parametrize("k, length", [(0, 64), (5, LONG), (1100, LONG)], ids=str)
def test_lightconv_decodes_exactly_in_constant_state(k, length, global_context):
    flags = ["--decoder-self-mixer", "lightconv_apptek", "--lightconv-max-relative", str(k)]
    mixer = decoder_mixer(flags + (["--lightconv-global-context"] if global_context else []))
    sizes = check_self(mixer, naive_lightconv, length)
    assert_constant(sizes)


# --- hard-coded Gaussian self-attention -----------------------------------------------------------

HC_CASES = {
    "paper": ["--hc-decoder-offsets", "l,c"],
    "sigma3_offsets": ["--hc-decoder-offsets=-4,0,2.5", "--hc-sigma", "3"],
    "conv": ["--hc-decoder-offsets", "l,c", "--hc-kernel", "conv"],
    "index": ["--hc-decoder-offsets", "l,c", "--hc-kernel", "index"],
}


@pytest.mark.parametrize("case", sorted(HC_CASES))
def test_hc_gaussian_decodes_exactly_in_a_window(case):
    mixer = decoder_mixer(["--decoder-self-mixer", "hc_gaussian", "--decoder-attention-heads", "4",
                           *HC_CASES[case]])
    assert mixer.window is not None and mixer.window < 100
    sizes = check_self(mixer, naive_hc_self, LONG)
    assert_constant(sizes)


def test_hc_gaussian_window_is_where_the_fp32_weights_end():
    """sigma = 1, offsets -1, 0: the pdf of distance 15 is exactly 0.0 in fp32, that of 14 is not
    (exp(-98) > 0): a head centred one step back needs distances 0..15, so 16 keys."""
    mixer = decoder_mixer(["--decoder-self-mixer", "hc_gaussian", "--hc-decoder-offsets", "l,c"])
    assert mixer.window == 16
    weights = mixer._causal_weights(0, LONG)  # distances LONG-1 .. 0
    assert (weights[:, : LONG - mixer.window] == 0).all()
    assert weights[0, LONG - mixer.window] > 0  # the oldest key in the window has a weight


def test_hc_gaussian_keeps_the_cache_when_no_window_is_shorter_than_the_longest_target():
    """sigma = 30 with 256 target positions: weights reach past every distance, so the cache stays."""
    mixer = decoder_mixer(["--decoder-self-mixer", "hc_gaussian", "--hc-sigma", "30",
                           "--max-target-positions", "256"])
    assert mixer.window is None
    sizes = check_self(mixer, naive_hc_self, 256)
    assert sizes[-1] > sizes[4]
    # The same sigma with a longer limit gets its (exact) window back.
    window = HardCodedSelfAttention(16, 2, [-1.0, 0.0], 30.0, "gaussian", False, True, max_length=4096).window
    assert isinstance(window, int) and 256 < window < 4096


# --- beam search ----------------------------------------------------------------------------------

BEAM_MIXERS = {
    "rposnet": (["--decoder-self-mixer", "rposnet", "--posnet-max-relative", "6"], naive_rposnet_self),
    "lightconv": (["--decoder-self-mixer", "lightconv_apptek", "--lightconv-max-relative", "6",
                   "--lightconv-global-context"], naive_lightconv),
    "lightconv_window": (["--decoder-self-mixer", "lightconv_apptek", "--lightconv-max-relative", "6"],
                         naive_lightconv),
    "hc_gaussian": (["--decoder-self-mixer", "hc_gaussian"], naive_hc_self),
}


@pytest.mark.parametrize("name", sorted(BEAM_MIXERS) + ["rposnet_cross", "rposnet_folded"])
def test_beam_reordering_in_the_middle_of_a_sentence(name):
    """Beams are permuted, duplicated and dropped past K steps; after the last reordering every
    step equals the naive decoder run on the reordered histories. ``rposnet_folded``: without a padding
    mask, as beam search decodes, from the folded table (grown past its first size), whose precomputed
    weights sum one ring (posnet_decoding.decode_self). ``rposnet_cross`` keeps its sources per sentence
    (state_reorder.PER_SENTENCE): two sentences of two hypotheses, reordered as fairseq's SequenceGenerator does,
    within their sentences, a finished one dropped."""
    reorders = {40: torch.tensor([1, 0, 0, 3]), 90: torch.tensor([2, 2, 1, 0]), 150: torch.tensor([3, 1])}
    within_sentences = {40: torch.tensor([1, 0, 3, 3]), 90: torch.tensor([1, 1, 2, 3]), 150: torch.tensor([2, 3])}
    length, last = 200, 150
    x = inputs(length, 4, 16)
    with torch.no_grad():
        if name == "rposnet_cross":
            mixer, sentences = cross_mixer(["rposnet", "--posnet-max-relative", "6"]), torch.tensor([0, 0, 1, 1])
            enc, enc_pad = inputs(90, 2, 16, seed=1)[:, sentences], left_pad(90, 2, 50)[sentences]
            stepped, x, _, enc, enc_pad = decode(mixer, x, enc=enc, enc_pad=enc_pad, reorders=within_sentences)
            reference = naive_rposnet_cross(mixer, x, enc, enc_pad)
        elif name == "rposnet_folded":
            mixer = decoder_mixer(BEAM_MIXERS["rposnet"][0])
            mixer.make_generation_fast_()
            stepped, x, *_ = decode(mixer, x, reorders=reorders)
            reference = naive_rposnet_self(mixer, x, torch.zeros(x.size(1), length, dtype=torch.bool))
        else:
            flags, naive = BEAM_MIXERS[name]
            mixer = decoder_mixer(flags)
            stepped, x, pad, *_ = decode(mixer, x, torch.zeros(4, length, dtype=torch.bool), reorders=reorders)
            reference = naive(mixer, x, pad)
    stepped = torch.cat(stepped[last:])
    assert stepped.size(1) == 2
    torch.testing.assert_close(stepped, reference[last:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["rposnet", "lightconv", "hc_gaussian"])
def test_interleaved_searches_reordered_at_every_step(name):
    """A beam reorder copies the window into the one the previous reorder released (state_reorder.REUSE):
    two searches with one mixer, reordered at every step and run step for step in turn, each give
    exactly what it gives alone."""
    mixer = decoder_mixer(BEAM_MIXERS[name][0])
    length = 40
    xs = [inputs(length, 4, 16, seed=s) for s in (0, 1)]
    orders = [{t: torch.randint(0, 4, (4,), generator=torch.Generator().manual_seed(100 * s + t))
               for t in range(1, length)} for s in (0, 1)]
    with torch.no_grad():
        alone = [decode(mixer, x, reorders=o)[0] for x, o in zip(xs, orders)]
    interleaved = decode_interleaved(mixer, xs, orders)
    for s in (0, 1):
        torch.testing.assert_close(interleaved[s], alone[s], atol=0, rtol=0)
