"""rPosNet's decoding at constant cost per step (PosNet paper, Eq. 9-10; docs/constant-cost-decoding.md).

rPosNet's energy of a key depends on its distance to the query only up to
the clipping distance K (Eq. 10), so keys beyond K share one energy and their
sum stands in for them: decoder self-attention keeps the last K values, the
sum of the older ones and their count (``clipped_decoding.py``); cross-
attention attends over the 2K-1 sources around the anchor floor(gamma n) and
the means of the sources on either side, from prefix and suffix sums made
once per sentence. aPosNet and arPosNet cannot do this (an absolute energy
is a key's own): they decode with the whole prefix cached, their decoder
self-attention from a table of weights (``prefix_decoding.py``), which
:func:`decode_step` dispatches to as well.

The functions take the mixer (``posnet.PositionAttention``: its value
projection, dropout and decoding steps) and its :class:`RelativeEnergies`.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .attention import masked_softmax, real_positions
from . import indexed_ring, prefix_decoding
from .clipped_decoding import clipped_decoding_step, slot_order
from .functional_calls import linear
from .state_reorder import PER_SENTENCE, SHARED


def decode_step(mixer, buffer, incremental_state, value, pad, length, need_weights):
    """``(T x B x E output, weights or None)`` of a decoding step of ``length`` queries that rPosNet's constant
    state (here) or aPosNet's and arPosNet's table of weights (``prefix_decoding.py``) takes, else None (the
    mixer's general path: the whole prefix cached). The output is the mixer's, ``out_proj`` applied."""
    fresh = not buffer  # a new buffer is stored; the stored one is written in place
    if mixer.absolute is not None:
        out = prefix_decoding.step(mixer, buffer, incremental_state, value, pad, length, need_weights)
        return None if out is None else (mixer.merge_heads(out), None)
    relative = mixer.relative
    if mixer.site.cross:
        out, probs = decode_cross(mixer, relative, buffer, value, pad, length, need_weights)
        out = mixer.merge_heads(out)
    else:
        if need_weights:
            raise ValueError(f"{mixer.NAME} decoder self-attention keeps the sum of the keys beyond K, "
                             "not their weights: it returns no weights while decoding incrementally")
        out, probs = decode_self(mixer, relative, buffer, value, pad, length), None
        # Gated, W_o is the wrapper's (as in Mixer.merge_heads): the identity is not called (a module call a step).
        out = out if isinstance(mixer.out_proj, nn.Identity) else linear(mixer.out_proj, out)
    if fresh:
        mixer._set_input_buffer(incremental_state, buffer)
    return out, probs


def step_energies(mixer, relative, steps):
    """Scaled fp32 rPosNet energies of the query positions ``steps`` (B x T): B x T x H x (2K+1)."""
    lo = int(steps.min())
    table = mixer.term_energies(relative, lo, int(steps.max()) + 1)  # H x n x (2K+1)
    return table[:, steps - lo].permute(1, 2, 0, 3) * mixer.scaling


def decoding_rows(mixer, relative, step):
    """``(rows, weights)`` made once per table that covers ``step`` (folded, grown to cover it first, or
    precomputed), or None where none does (the energies are then computed per step).

    Every row of the batch is at the same step, so one row of energies serves them all: ``rows`` are the
    scaled fp32 energies N x H x (K+1) of every step, in the order of ``clipped_decoding_step``'s state
    (``slot_order``: a causal query at n sees the slots m - n = -K..0, i.e. 0..K), and ``weights`` the
    steps' attention weights for rows without pads (``indexed_ring.bag_weights``). Kept in
    ``relative.decoding_rows`` (``derived_cache.py``), made anew when the table is replaced (grown, converted) or
    written in place."""
    if not relative.covers(step + 1):
        if not (mixer.folded and not mixer.training):
            return None
        mixer.term_energies(relative, step, step + 1)  # grows the folded table to cover the step
    return relative.decoding_rows.get(relative.table, lambda: _rows_and_weights(mixer, relative))


def _rows_and_weights(mixer, relative):
    """The ``(rows, weights)`` of :func:`decoding_rows`, from ``relative.table``."""
    k, table = relative.max_relative, relative.table
    period = max(k, 1)  # the ring's slot is the step modulo K
    orders = torch.stack([slot_order(k, n % period, torch.device("cpu")) for n in range(period)])
    order = orders.to(table.device)[torch.arange(table.size(1), device=table.device) % period]  # N x (K+1)
    rows = table.float()[:, :, : k + 1].gather(2, order.unsqueeze(0).expand(table.size(0), -1, -1))
    rows = (rows * mixer.scaling).transpose(0, 1).contiguous()
    return rows, indexed_ring.bag_weights(table.float()[:, :, : k + 1].transpose(0, 1) * mixer.scaling)


def self_energies(mixer, relative, step):
    """Scaled fp32 energies 1 x H x (K+1) of a causal query at position ``step``, in the order of
    ``clipped_decoding_step``'s state: a row of :func:`decoding_rows`, or computed where no table covers it."""
    made = decoding_rows(mixer, relative, step)
    if made is None:
        k = relative.max_relative
        row = mixer.term_energies(relative, step, step + 1)[:, 0, : k + 1] * mixer.scaling  # H x (K+1)
        return row[:, slot_order(k, step % k if k else 0, row.device)].unsqueeze(0)
    return made[0][step: step + 1]  # 1 x H x (K+1)


def decode_self(mixer, relative, buffer, value, pad, length):
    """Decoder self-attention, step by step: every key at distance >= K shares the slot-0 energy of
    Eq. 10, so the last K values, the sum of the older ones and their count replace the cache. While
    no row has had a pad (beam search), a step from a table attends with its precomputed weights
    (``indexed_ring.py``). Returns the T x B x E output before ``out_proj`` (heads side by side)."""
    values = linear(mixer.v_proj, value)  # T x B x E (gated: the wrapper's ValueActivation, called)
    # Every row is at the same step: one count for the batch, a Python int (no tensor to make or read).
    first = buffer.get("step_count", 0)
    mixer.keep_state(buffer, "step_count", first + length, SHARED)
    if length == 1:  # (generation: no loop, no slice, no concatenation)
        return _self_step(mixer, relative, buffer, first, values, pad)
    outs = [_self_step(mixer, relative, buffer, first + t, values[t: t + 1], None if pad is None else pad[:, t: t + 1])
            for t in range(length)]
    return torch.cat(outs, dim=0)


def _self_step(mixer, relative, buffer, step, values, pad):
    """Step ``step`` of :func:`decode_self`: ``values`` 1 x B x E, ``pad`` B x 1 or None; the 1 x B x E output."""
    # (a window, once started by a pad, stays)
    weights = None if pad is not None or mixer.training or "window" in buffer else \
        step_weights(mixer, relative, buffer, step, values.size(1))
    if weights is not None:
        return indexed_ring.step(mixer, buffer, step, values, weights)
    if "ring" in buffer:  # a pad after steps without pads: the ring taken apart
        indexed_ring.unfold(mixer, buffer, step, values.dtype)
    out = clipped_decoding_step(mixer, buffer, step, mixer.split_heads(values), pad, self_energies(mixer, relative, step),
                                shared_tail=True, dropout=mixer.dropout, training=mixer.training, ordered=True)
    return out.permute(2, 0, 1, 3).reshape(values.shape)  # B x H x 1 x D_h -> 1 x B x E


def step_weights(mixer, relative, buffer, step, batch):
    """The weight of every ring row that ``step`` of ``batch`` hypotheses reads in this layer
    (``indexed_ring.row_weights``), or None where a table of the layers does not cover the step.

    The weights of every step (:func:`decoding_rows`' weights, the same for every row) of every layer that
    decodes through a ring (:func:`ring_group`), each made from that layer's own table, are stacked once per
    search and kept in the search's state of the layer that first asks; each step then looks up every layer's
    rows at once, kept for the call (``Mixer.shared``, by step: a call may take several) where the other layers
    find them: a layer neither compares its table with the one they were made from nor looks its weights up
    (issue 48: host time and operators per layer and step). A search that outgrows them asks
    :func:`decoding_rows` again (the tables grow); a new search starts from the tables as they are then."""
    layers, index, kind = ring_group(mixer, relative.max_relative)
    steps = mixer.shared(kind, dict, layers)  # step -> (layers, every layer's weights), for this call
    made = steps.get(step)
    if made is None or made[0] != len(layers):  # (a first step: the layers join the group as they step)
        made = steps[step] = (len(layers), _every_layer(mixer, buffer, layers, step, batch))
    return None if made[1] is None else made[1][index]


def _every_layer(mixer, buffer, layers, step, batch):
    """The weights of :func:`step_weights` of every layer of ``layers``, or None."""
    stacked = buffer.get("ring_weights")  # layers x steps x (H (K+2) + 1)
    if stacked is None or step >= stacked.size(1) or stacked.size(0) != len(layers):
        made = [decoding_rows(layer, layer.relative, step) for layer in layers]
        if any(rows is None for rows in made):
            return None
        steps = min(rows[1].size(0) for rows in made)  # (the steps that every layer's table covers)
        stacked = torch.stack([rows[1][:steps] for rows in made]).to(indexed_ring.ring_dtype(mixer, torch.float32))
        stacked = mixer.keep_state(buffer, "ring_weights", stacked, SHARED)
    return indexed_ring.row_weights(stacked[:, step], batch, mixer.num_heads).unbind(0)


# The kind of the side's modules (``ForwardContext.register``) that are rPosNet layers decoding through a ring.
RINGS = "rposnet decoding rings"


def ring_group(mixer, k):
    """``(layers, index, kind)``: the layers of the mixer's side with its heads and K that have decoded through a
    ring, in the order they first did, the mixer's place among them (only itself where it has no side's context),
    and the kind they are registered as (also the key of the weights they share per call, :func:`step_weights`).

    Listed as they first step, not at build: a precomputed mixer (posnet-precompute's table form) belongs to no
    group of training layers (``side_layers``), and each layer's weights must come from its own table. Kept in
    the mixer's attributes, with the list the context holds, so that a copy of the model holds its own."""
    group = vars(mixer).get("ring_group")
    if group is None:
        context, kind = mixer.forward_context, (RINGS, mixer.num_heads, k)
        layers = [mixer] if context is None else context.register(kind, mixer)
        group = mixer.ring_group = (layers, len(layers) - 1, kind)
    return group


def cross_steps(mixer, buffer, batch, length, device):
    """``(positions, first)`` of a decoding step of aPosNet's or arPosNet's cross-attention (the whole source
    attended, ``PositionAttention.forward``): the B x ``length`` target positions, made once per step for every
    layer (``Mixer.shared``), and the first of them. Every row is at the same step: the count is a Python int,
    so that no tensor of steps is advanced or copied by a beam reorder, and the positions' bounds are known
    without reading the device (a read stalls a GPU's queue, per layer and step)."""
    first = buffer.get("step_count", 0)
    mixer.keep_state(buffer, "step_count", first + length, SHARED)
    positions = mixer.shared(("posnet cross steps", first, batch, length),
                             lambda: torch.arange(first, first + length, device=device).expand(batch, length))
    return positions, first


def cross_values(mixer, value, key_padding_mask, buffer, batch, device):
    """aPosNet's and arPosNet's cross-attention values (B x H x S x D_h), key positions and padding mask: from the
    buffer once decoding has kept them (the encoder side is computed once per sentence), else from the encoder
    output (teacher-forced, or the first step)."""
    if buffer is not None and "value" in buffer:
        return buffer["value"], buffer["key_positions"], buffer.get("key_padding_mask")
    v = mixer.split_heads(mixer.v_proj(value))
    key_pos = real_positions(key_padding_mask, batch, value.size(0), device)
    if buffer is not None:
        # alike in a sentence's hypotheses (the encoder output's), copied only when sentences are dropped
        mixer.keep_state(buffer, "value", v, PER_SENTENCE)
        mixer.keep_state(buffer, "key_positions", key_pos, PER_SENTENCE)
        if key_padding_mask is not None:  # (the caller's tensor: a copy is fresh memory)
            mixer.keep_state(buffer, "key_padding_mask", key_padding_mask, PER_SENTENCE)
    return v, key_pos, key_padding_mask


def cache_source(mixer, buffer, value, pad):
    """The encoder side of cross-attention, once per sentence: the values in real-position order
    (pads last, zeroed), their prefix and suffix sums (fp32) and the sentence lengths. Alike in a sentence's
    hypotheses (made from the encoder output, which beam search repeats per hypothesis), so kept as they are by a
    reorder within sentences and copied only when sentences are dropped (``state_reorder.PER_SENTENCE``)."""
    v = mixer.split_heads(mixer.v_proj(value))  # B x H x S x D_h
    batch, heads, src_len, head_dim = v.shape
    acc = torch.promote_types(v.dtype, torch.float32)
    positions = real_positions(pad, batch, src_len, v.device)
    if pad is None:
        pad = torch.zeros(batch, src_len, dtype=torch.bool, device=v.device)
    # A stable sort of the pad flags puts the real tokens first, in order, whichever side is padded.
    order = torch.sort(pad.to(torch.uint8), dim=1, stable=True).indices
    source = v.gather(2, order[:, None, :, None].expand_as(v))
    lengths = (~pad).sum(dim=1, keepdim=True)  # B x 1
    beyond = torch.arange(src_len, device=v.device).unsqueeze(0) >= lengths
    source = source.masked_fill(beyond[:, None, :, None], 0.0)
    zero = source.new_zeros(batch, heads, 1, head_dim, dtype=acc)
    mixer.keep_state(buffer, "source", source, PER_SENTENCE)
    mixer.keep_state(buffer, "prefix", torch.cat([zero, torch.cumsum(source.to(acc), dim=2)], dim=2),
                     PER_SENTENCE)  # m < j
    mixer.keep_state(buffer, "suffix", torch.cat([torch.cumsum(source.to(acc).flip(2), dim=2).flip(2), zero], dim=2),
                     PER_SENTENCE)  # m >= j
    mixer.keep_state(buffer, "source_lengths", lengths, PER_SENTENCE)
    # Only for the attention weights fairseq may ask for, in its column layout (pad may be the caller's).
    mixer.keep_state(buffer, "source_positions", positions, PER_SENTENCE)
    mixer.keep_state(buffer, "source_pad", pad, PER_SENTENCE)


def decode_cross(mixer, relative, buffer, value, pad, length, need_weights):
    """Cross-attention, step by step: around the anchor a = floor(gamma n) (Eq. 10) the sources
    m <= a-K share the slot-0 energy and m >= a+K the slot-2K one, so the step attends over the
    2K-1 values in between and the two means from the prefix/suffix sums: O(K D) per step."""
    if "source" not in buffer:
        cache_source(mixer, buffer, value, pad)
    source, prefix, suffix = buffer["source"], buffer["prefix"], buffer["suffix"]
    lengths = buffer["source_lengths"]
    batch, heads, src_len, head_dim = source.shape
    k = relative.max_relative
    steps = mixer.decoding_steps(buffer, batch, length, source.device)
    energy = step_energies(mixer, relative, steps)  # B x T x H x (2K+1)
    anchors = relative.anchors(steps)
    inner = max(2 * k - 1, 0)  # the sources with a slot of their own, a-K+1..a+K-1

    def mean(sums, at, count):  # sums[at] / count, per head: B x H x 1 x D_h
        picked = sums.gather(2, at[:, None, :, None].expand(batch, heads, 1, head_dim))
        return picked / count.clamp(min=1).view(batch, 1, 1, 1)

    outs, weights = [], []
    for t in range(length):
        anchor = anchors[:, t: t + 1]  # B x 1
        left_count = (anchor - k + 1).clamp(min=0).minimum(lengths)  # m <= a-K
        right_start = (anchor + max(k, 1)).clamp(min=0).minimum(lengths)  # m >= a+K (K=0: beyond a)
        right_count = lengths - right_start
        window = anchor - k + 1 + torch.arange(inner, device=source.device)  # B x (2K-1)
        outside = (window < 0) | (window >= lengths)
        index = window.clamp(0, src_len - 1)[:, None, :, None].expand(batch, heads, inner, head_dim)
        values = torch.cat([mean(prefix, left_count, left_count),
                            source.gather(2, index).to(prefix.dtype),
                            mean(suffix, right_start, right_count)], dim=2)  # B x H x (2K+1) x D_h
        e = energy[:, t]
        logits = torch.cat([e[..., :1] + torch.log(left_count.clamp(min=1)).unsqueeze(1),
                            e[..., 1: 1 + inner],
                            e[..., 2 * k:] + torch.log(right_count.clamp(min=1)).unsqueeze(1)], dim=-1)
        invalid = torch.cat([left_count == 0, outside, right_count == 0], dim=1).unsqueeze(1)
        probs = masked_softmax(logits, invalid)  # B x H x (2K+1)
        dropped = F.dropout(probs, p=mixer.dropout, training=mixer.training)
        outs.append(torch.matmul(dropped.unsqueeze(2), values).to(source.dtype))
        if need_weights:
            weights.append(source_weights(buffer, probs, k, anchor, right_start, left_count, right_count))
    return torch.cat(outs, dim=2), torch.cat(weights, dim=2) if need_weights else None


def source_weights(buffer, probs, k, anchor, right_start, left_count, right_count):
    """B x H x 1 x S attention weights in fairseq's column layout: a source in a shared-energy
    group gets its group's probability divided by the group's size (they are equal)."""
    positions, pad = buffer["source_positions"], buffer["source_pad"]
    inner = probs.size(-1) - 2
    group = torch.where(positions <= anchor - k, 0,
                        torch.where(positions >= right_start, inner + 1, positions - anchor + k))
    size = torch.where(group == 0, left_count, torch.where(group == inner + 1, right_count, 1))
    shares = probs.gather(2, group.unsqueeze(1).expand(-1, probs.size(1), -1)) / size.unsqueeze(1)
    return shares.masked_fill(pad.unsqueeze(1), 0.0).unsqueeze(2)
