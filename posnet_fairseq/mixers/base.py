"""The mixer contract: :class:`Mixer`, the base class of the plugin's own mixers.

A *mixer* is a drop-in replacement for fairseq's ``MultiheadAttention`` at one
attention site of the Transformer:

* ``encoder_self``  -- encoder self-attention (source left-padded by fairseq),
* ``decoder_self``  -- causal decoder self-attention (target right-padded),
* ``cross``         -- decoder -> encoder attention (``static_kv=True``).

fairseq's layers call ``mixer(query, key, value, key_padding_mask,
incremental_state, need_weights, static_kv, attn_mask, ...)`` with T x B x C
tensors and expect ``(output, attention_or_None)``; the decoder layer also reads
``num_heads``/``head_dim`` and calls ``_get_input_buffer`` unconditionally, and
beam search calls ``reorder_incremental_state``. :class:`Mixer` provides all of
that; a concrete mixer implements ``forward`` and ``build``.

What every mixer guarantees (and ``tests/test_mixer_contract.py`` checks for
every registered mixer at every site it claims):

* positions come from the padding mask (``attention.real_positions``), never from the
  column index, so a sentence gives the same output alone or batched;
* every cached tensor has the batch on dim 0 (or is the same for every
  hypothesis: ``state_reorder.SHARED``; or holds several side by side, the
  batch on dim 1: ``state_reorder.GROW_PARTS``), so one ``index_select`` in
  :meth:`Mixer.reorder_incremental_state` follows beam search, and is stored
  with :meth:`Mixer.keep_state`, which declares how that copy is made
  (``state_reorder.py``);
* step-by-step decoding equals the teacher-forced pass;
* no NaN/inf in fp32/bf16/fp16 up to :meth:`Mixer.max_positions`.

Mixers know nothing of fairseq's layers: the model hands them a
``registry.MixerContext`` describing the site. The registry is in
``registry.py``, the numeric helpers in ``attention.py``, the LayerNorm
conventions in ``norms.py`` and the constant-state decoding of clipped
relative energies in ``clipped_decoding.py``.
"""
from typing import Dict, Optional

import torch
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor, nn

from . import growing_cache, state_reorder
from .attention import real_positions
from .state_reorder import COPY, GROW, Reorder


class Mixer(FairseqIncrementalState, nn.Module):
    """Base class: fairseq's attention call contract and incremental-state plumbing.

    Subclasses implement ``forward`` with MultiheadAttention's signature and
    store their decoding state with :meth:`_set_input_buffer` as a dict of
    tensors whose dim 0 is the (beam-expanded) batch, each put there by
    :meth:`keep_state`.
    """

    STATE_KEY = "mixer_state"
    SPARE = state_reorder.SPARE

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by the number of heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        # How a beam reorder copies each state tensor, by buffer key, as keep_state declared it.
        self._state_reorders: Dict[str, Reorder] = {}

    def max_positions(self) -> Optional[int]:
        """Longest sequence this mixer accepts (None: no limit)."""
        return None

    # The side's ForwardContext, where a mixer was given it (content attention, PosNet).
    forward_context = None

    def shared(self, key, make, anchor=None):
        """``make()``, made once per call for every layer of the side that asks with the same ``key`` and
        ``anchor`` (:meth:`.ForwardContext.shared`) where the mixer has the side's context: work that depends
        on positions and shapes only, each operator a kernel launch on a GPU."""
        return make() if self.forward_context is None else self.forward_context.shared(key, make, anchor)

    def init_incremental_state(self):
        super().init_incremental_state()
        # The buffer's key in a search's incremental state, formatted once (fairseq formats it at every lookup).
        self._state_key = self._get_full_incremental_state_key(self.STATE_KEY)

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        return (None if incremental_state is None else incremental_state.get(self._state_key)) or {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        if incremental_state is not None:
            incremental_state[self._state_key] = buffer
        return incremental_state

    def keep_state(self, buffer: Dict[str, Optional[Tensor]], name: str, tensor: Tensor, how: Reorder) -> Tensor:
        """Stores ``tensor`` (batch on dim ``how.batch``, 0 but where parts lie side by side) in ``buffer`` under
        ``name``, declaring how a beam reorder copies it (``state_reorder.COPY``, ``REUSE`` or ``GROW``: whether
        into the memory the previous reorder released, which only a tensor that the mixer created and nothing
        else refers to may be; ``SHARED``: not at all, one value for the whole batch)."""
        buffer[name] = tensor
        self._state_reorders[name] = how
        return tensor

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Every state tensor in beam order ``new_order``, each copied as :meth:`keep_state` declared it
        (``state_reorder.py``); a tensor stored without a declaration is refused."""
        buffer = self._get_input_buffer(incremental_state)
        if not buffer:
            return incremental_state
        declared, reordered, parts = self._state_reorders, {}, []
        for name, state in buffer.items():
            how = declared.get(name)
            if how is None:
                if name.endswith(self.SPARE):  # the memory a reorder released: the next one's spare, below
                    continue
                raise ValueError(f"{type(self).__name__}: decoding state {name!r} was stored without declaring how "
                                 "a beam reorder copies it: store it with Mixer.keep_state (state_reorder.py)")
            if state is None or how.shared or (how.per_sentence and state.size(0) == new_order.size(0)):
                reordered[name] = state
            elif how.part is not None:
                parts.append((name, how.part))
            elif how.composed:
                reordered[name] = state_reorder.compose(state, new_order)
            elif how.reuse and not state.requires_grad:  # (out= copies do not record gradients)
                spare = name + self.SPARE
                reordered[name], reordered[spare] = state_reorder.reorder(state, new_order, buffer.get(spare), how)
            else:
                reordered[name] = state.index_select(how.batch, new_order)
        views = {}  # of each state copied above that holds parts: all its parts made by one operator
        for name, (key, index) in parts:
            if key not in views:
                views[key] = reordered[key].unbind(state_reorder.BESIDE)
            reordered[name] = views[key][index]
        incremental_state[self._state_key] = reordered
        return incremental_state

    def decoding_steps(self, buffer: Dict[str, Optional[Tensor]], batch: int, length: int, device) -> Tensor:
        """Absolute 0-based target positions (B x length) of the current query block.

        During incremental decoding the number of tokens already seen is kept
        in ``buffer["steps"]`` (B x 1) and advanced here; the caller stores
        ``buffer`` back with :meth:`_set_input_buffer`.
        """
        start = buffer.get("steps")
        if start is None:
            start = torch.zeros(batch, 1, dtype=torch.long, device=device)
        # One step (generation) is at the count so far: no arange and no add to launch.
        positions = start if length == 1 else start + torch.arange(length, device=device).unsqueeze(0)
        self.keep_state(buffer, "steps", start + length, COPY)
        return positions

    # ----- plumbing shared by the attention-like mixers (multi-head values, B x H x T x S weights) -----

    def split_heads(self, x: Tensor) -> Tensor:
        """T x B x D -> B x H x T x D_h.

        Batch first, so a decoding cache of these tensors follows beam search
        through :meth:`reorder_incremental_state`, and time on dim 2, so steps
        append in one copy (``growing_cache``).
        """
        length, batch, _ = x.shape
        return x.view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def merge_heads(self, out: Tensor) -> Tensor:
        """B x H x T x D_h -> T x B x D, then ``self.out_proj``: the inverse of :meth:`split_heads`."""
        batch, _, length, _ = out.shape
        heads = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)
        # Gated (gating.py), W_o is the wrapper's and out_proj the identity: not called, a module call is host
        # time per layer and step (issue 48).
        return heads if isinstance(self.out_proj, nn.Identity) else self.out_proj(heads)

    def cache_self_attention(self, incremental_state, buffer: Dict[str, Optional[Tensor]], pad: Optional[Tensor],
                             pad_key: Optional[str] = "prev_key_padding_mask", **tensors: Optional[Tensor]):
        """Appends this step to the self-attention decoding cache and stores the buffer.

        ``tensors`` (B x H x T x D_h, from :meth:`split_heads`) are keyed by
        their buffer key (e.g. ``prev_value=v``); each is appended on the time
        dim to what ``buffer`` holds under that key, in place where the cache
        has spare steps (``growing_cache``), and reordered into released memory
        (``state_reorder.GROW``; two or more side by side in one tensor, each
        key's cache a view of it: :meth:`append_self_attention`). A None tensor is neither
        cached nor returned changed (``relattn`` has no keys). Unless
        ``pad_key`` is None, the B x T padding mask ``pad`` (all False when
        None) is appended under ``pad_key`` too, so past pad steps stay masked.

        Returns ``(*tensors, pad, key_positions)``: the whole cache and the key
        positions 0..S-1 (B x S). The decoder's targets are right-padded, so
        a cached column index is the key's real position.
        """
        *cached, pad = self.append_self_attention(incremental_state, buffer, pad, pad_key, **tensors)
        first = next(t for t in cached if t is not None)
        batch, keys = first.size(0), first.size(2)
        return (*cached, pad, torch.arange(keys, device=first.device).unsqueeze(0).expand(batch, keys))

    def append_self_attention(self, incremental_state, buffer: Dict[str, Optional[Tensor]], pad: Optional[Tensor],
                              pad_key: Optional[str] = "prev_key_padding_mask", **tensors: Optional[Tensor]):
        """:meth:`cache_self_attention` without the key positions: ``(*tensors, pad)``, for a mixer that
        reads the keys' columns only (their count), which saves an operator per layer and step.

        Two or more tensors are cached side by side in one n x B x H x S x D_h tensor (stored under their
        keys joined by ``+``), each key's cache a view of it (``state_reorder.part``): a beam reorder copies
        them all with one ``index_select``."""
        first = next(t for t in tensors.values() if t is not None)
        batch, length, device = first.size(0), first.size(2), first.device
        names = [name for name, tensor in tensors.items() if tensor is not None]
        if len(names) == 1:
            name = names[0]
            tensors[name] = self.keep_state(buffer, name, growing_cache.append(buffer.get(name), first), GROW)
        else:
            key = "+".join(names)
            steps = torch.stack([tensors[name] for name in names], dim=state_reorder.BESIDE)
            joint = self.keep_state(buffer, key, growing_cache.append(buffer.get(key), steps), state_reorder.GROW_PARTS)
            for index, (name, part) in enumerate(zip(names, joint.unbind(state_reorder.BESIDE))):
                tensors[name] = self.keep_state(buffer, name, part, state_reorder.part(key, index))
        if pad_key is not None:
            if pad is None:
                pad = torch.zeros(batch, length, dtype=torch.bool, device=device)
            if pad_key in buffer:
                pad = torch.cat([buffer[pad_key], pad], dim=1)
            self.keep_state(buffer, pad_key, pad, COPY)
        self._set_input_buffer(incremental_state, buffer)
        return (*tensors.values(), pad)

    def self_attention_positions(self, incremental_state, pad: Optional[Tensor],
                                 pad_key: Optional[str] = "prev_key_padding_mask", **tensors: Optional[Tensor]):
        """Query and key positions of a self-attention call, through the decoding cache when decoding.

        Teacher-forced, queries are the keys and both take their real
        positions from ``pad``; decoding, the queries are the decoding steps
        and ``tensors``/``pad`` go through :meth:`cache_self_attention`.
        Returns ``(*tensors, pad, query_positions, key_positions)``.
        """
        first = next(t for t in tensors.values() if t is not None)
        batch, length, device = first.size(0), first.size(2), first.device
        if incremental_state is None:
            positions = real_positions(pad, batch, length, device)
            return (*tensors.values(), pad, positions, positions)
        buffer = self._get_input_buffer(incremental_state)
        query_pos = self.decoding_steps(buffer, batch, length, device)
        *cached, pad, key_pos = self.cache_self_attention(incremental_state, buffer, pad, pad_key, **tensors)
        return (*cached, pad, query_pos, key_pos)

    @staticmethod
    def fairseq_weights(probs: Tensor, dtype, need_weights: bool, need_head_weights: bool) -> Optional[Tensor]:
        """The attention weights as fairseq's MultiheadAttention returns them, or None.

        ``probs`` is B x H x T x S; fairseq returns H x B x T x S with
        ``need_head_weights``, else the mean over heads (B x T x S), in the
        model's ``dtype``, and None when neither is asked for.
        """
        if not (need_weights or need_head_weights):
            return None
        weights = probs.to(dtype).transpose(0, 1)
        return weights if need_head_weights else weights.mean(dim=0)
