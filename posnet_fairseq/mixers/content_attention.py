"""Content attention with position hooks: the one host of the position schemes.

Scaled dot-product multi-head self-attention (Vaswani et al., 2017, Eq. 1
and 2), with two places where a position scheme plugs in:

* a **logit bias** ``bias(query_positions, key_positions)`` added to the
  scaled logits before masking and softmax,
  ``softmax(Q K^T / sqrt(d_h) + B) V``: ALiBi (``alibi.py``), T5's bucketed
  bias (``t5_bias.py``), KERPLE (``kerple.py``), TISA's kernels
  (``tisa.py``). Every one of them depends on the key-query distance only
  (a :class:`~.distance_bias.DistanceBias`);
* a **q/k transform** applied to the queries and to the keys (B x H x T x
  d_h, with their positions) before the dot product: RoPE's rotation
  (``rope.py``), xPos's scaled rotation (``xpos.py``). It is a module with
  ``rotation(positions, device, lengths, dtype)``, the per-position transform, computed
  once per call for queries and keys, ``rotate(x, rotation)`` for the
  queries and ``rotate_key(x, rotation)`` for the keys: the two may differ
  (xPos scales keys by the inverse of the queries' scale; RoPE turns both
  alike).

The transform takes 0-based real positions (B x T) from the padding mask
(sources are left-padded), or, while decoding, the decoding step (targets
are right-padded); in a training pass with a position augmentation
(``position_augmentation``), the positions the side drew for that pass, and
with RoPE scaling by source length, the source lengths, both from the side's
``forward_context``. A bias takes query and key positions (B x T, B x S) the
same way and returns fp32 (B or 1) x H x T x S; a :class:`DistanceBias` is
given column indices (1 x T, 1 x S) instead: left padding shifts a sentence
as a whole, so every distance between its real tokens is the column
distance, and the bias is computed once for the batch, not per sentence.

Each scheme is a mixer of its own (registered in its file as a subclass of
:class:`ContentAttention` whose ``build`` plugs the scheme in), serving the
self-attention sites: cross attention has no distance between a target and
a source position (see docs/position-schemes.md for the choice).

The projections are named and initialised as in fairseq's
MultiheadAttention (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), so
that with no hook the parameter count is the Transformer's and the PosNet
gating (``gating.py``) can wrap ``v_proj`` and ``out_proj``. The decoding
cache holds the projected (for RoPE: rotated) keys and values, batch first
(``Mixer.cache_self_attention``), so beam search reorders it with the rest.
"""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import families
from .attention import masked_softmax, real_positions, softmax_masks
from .base import Mixer
from .derived_cache import DerivedCache
from .distance_bias import DistanceBias, row_of
from .fused_attention import fused_attention, masked_attention, masked_bias
from .state_reorder import COPY, SHARED

PAD_KEY = "prev_key_padding_mask"
# The decoding state keys of the stacked projection weights and biases (ContentAttention._step_projections).
JOINED, JOINED_BIAS = "joined_projections", "joined_projection_biases"
# The device types on which a decoding step (one query) attends by explicit matrix products: for a single query
# torch's fused CPU kernel took 1.4-2.6x their time (S = 30-200). On a GPU the step is bound by launches, and the
# fused kernel is one launch (two with a bias) where the explicit products launch 3-6 (issue 48).
EXPLICIT_DECODING = ("cpu",)
# The decoding state key of a distance bias's table (DistanceBias.decoding_table), a step's row a view of it.
BIAS_TABLE = "bias_table"


class ContentAttention(Mixer):
    """Scaled dot-product multi-head self-attention with a logit-bias hook and a q/k-transform hook.

    ``bias`` and ``transform`` are modules (or None) with the signatures in
    the module docstring. ``shared_bias`` says that ``bias`` belongs to all
    layers of one encoder/decoder (T5 shares its table across layers): it is
    then registered there (``MixerContext.shared_module``), not here, so the
    state dict holds it once.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, causal: bool = False,
                 bias: Optional[nn.Module] = None, transform: Optional[nn.Module] = None,
                 shared_bias: bool = False, forward_context=None):
        super().__init__(embed_dim, num_heads)
        self.dropout, self.causal = dropout, causal
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        # The decoding step's stacked q/k/v weights and biases (_step_projections), made from the parameters.
        self.joined_projections = DerivedCache()
        self.shared_bias = shared_bias
        if shared_bias:  # owned (and registered) by the encoder/decoder: referred to, not registered again
            object.__setattr__(self, "position_bias", bias)
        else:
            self.position_bias = bias
        self.transform = transform
        self.forward_context = forward_context
        if forward_context is not None and transform is not None:
            forward_context.position_readers += 1
        self.reset_parameters()

    # The bias class, built from the number of heads alone, of a scheme without options (ALiBi, KERPLE).
    BIAS = None

    @classmethod
    def build(cls, ctx):
        return cls.at_site(ctx, bias=cls.BIAS(ctx.num_heads))

    @classmethod
    def at_site(cls, ctx, **hooks):
        """The mixer at ``ctx``'s site with the position ``hooks`` (``bias``, ``transform``, ``shared_bias``)."""
        return cls(ctx.embed_dim, ctx.num_heads, ctx.dropout, ctx.site.causal, forward_context=ctx.forward_context,
                   **hooks)

    def reset_parameters(self):
        # As fairseq's MultiheadAttention initialises self-attention, so that
        # swapping mha for a position scheme changes only the position treatment.
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask, given only when not incremental) is unused: the positions mask.
        if before_softmax:
            raise ValueError(f"{type(self).__name__} does not return pre-softmax logits (before_softmax=True)")
        length, batch, _ = query.shape
        buffer = None if incremental_state is None else self._get_input_buffer(incremental_state)
        if buffer is not None and query is key is value and not torch.is_grad_enabled():
            q, k, v = self._step_projections(query, buffer)
        else:
            q = self.split_heads(self.q_proj(query))
            k = self.split_heads(self.k_proj(key))
            v = self.split_heads(self.v_proj(value))
        pad = key_padding_mask
        shift_invariant = isinstance(self.position_bias, DistanceBias)
        if incremental_state is None:
            # Positions, masks, RoPE's rotation and distance grids depend on the call's padding and length
            # only: made once per call for every layer (ForwardContext.shared), each launch counting on a GPU.
            query_pos = key_pos = self._positions(pad, batch, length, query.device)
        else:
            # Every hypothesis decodes the same steps past .. past + T - 1 (targets are right-padded): their
            # count is the cache's length, known on the host, so no step state is kept, reordered or advanced.
            past = 0 if "prev_key" not in buffer else buffer["prev_key"].size(2)
            # A position bias reads them, a block of steps masks its future by them; a one-step row of a
            # distance-only bias is the same for every step count.
            bias_reads = self.position_bias is not None and not shift_invariant
            columns = length > 1 or bias_reads
            query_pos = self._columns(incremental_state, past, length, query.device) if columns else None
        if self.transform is not None:
            # Self-attention: this call's keys are its queries' tokens, at the same positions.
            q, k = self._rotate(q, k, query_pos, incremental_state, None if incremental_state is None else past)
        if incremental_state is None:
            # Only a masked pad can leave a row without keys (a causal row sees itself).
            masks = self.shared(("softmax_masks", length, self.causal), lambda: softmax_masks(
                self._teacher_forced_mask(pad, length, query.device), pad is not None), pad)
            if shift_invariant and not (need_weights or need_head_weights):  # the mask, made for all layers
                mask = self._distance_mask(length, masks[0], q)
                return self.merge_heads(masked_attention(q, k, v, mask, masks[1], self.dropout * self.training)), None
            bias = self._distance_bias(length, query.device) if shift_invariant else None
            if self.position_bias is not None and not shift_invariant:
                bias = self.position_bias(query_pos, key_pos)
        else:
            k, v, pad = self.append_self_attention(incremental_state, buffer, pad,
                                                   self._pad_history(buffer, pad, past), prev_key=k, prev_value=v)
            keys = past + length
            key_pos = self._columns(incremental_state, 0, keys, query.device) if columns else None
            invalid = None if pad is None else pad[:, None, None, :].bool()
            if self.causal and length > 1:  # one decoding step sees only its past
                future = (key_pos.unsqueeze(1) > query_pos.unsqueeze(2)).unsqueeze(1)  # 1 x 1 x T x S
                invalid = future if invalid is None else invalid | future
            masks = softmax_masks(invalid, pad is not None)
            bias = self._decoding_bias(buffer, query_pos, key_pos, keys, length, query.device)
        explicit = incremental_state is not None and query.device.type in EXPLICIT_DECODING
        if need_weights or need_head_weights or explicit:
            out, probs = self._attend_with_weights(q, k, v, bias, masks)
            weights = self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)
        else:
            out, weights = fused_attention(q, k, v, bias, masks, self.dropout if self.training else 0.0), None
        return self.merge_heads(out), weights

    def _step_projections(self, x: Tensor, buffer):
        """q, k, v of a decoding step (B x H x T x d_h), the plain Linear ones among the first (q and k, and v
        where it is one: PosNet gating's values and int8's quantized layers are not) in one batched product: a
        step is bound by per-operator overhead (issue 48). Their weights are stacked once per model and anew when
        the parameters change (``joined_projections``); a search's state refers to them, looked up at its first
        step only (no gradient is taken, so they do not change): a lookup checks six parameters."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        count = 0
        while count < 3 and type(projections[count]) is nn.Linear:
            count += 1
        if count < 2:
            return tuple(self.split_heads(projection(x)) for projection in projections)
        if JOINED not in buffer:
            joined = projections[:count]
            weights, biases = self.joined_projections.get([t for p in joined for t in (p.weight, p.bias)], lambda: (
                torch.stack([p.weight.t() for p in joined]), torch.stack([p.bias for p in joined]).unsqueeze(1)), count)
            self.keep_state(buffer, JOINED, weights, SHARED)  # count x D x D
            self.keep_state(buffer, JOINED_BIAS, biases, SHARED)
        length, batch, dim = x.shape
        rows = x.reshape(1, length * batch, dim).expand(count, length * batch, dim)
        heads = torch.baddbmm(buffer[JOINED_BIAS], rows, buffer[JOINED]).unbind(0)  # each T B x D, contiguous
        return (*(h.view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3) for h in heads),
                *(self.split_heads(projection(x)) for projection in projections[count:]))

    def _decoding_bias(self, buffer, query_pos, key_pos, keys: int, length: int, device) -> Optional[Tensor]:
        """The position bias of a decoding call's queries over its ``keys`` keys, the same for every sentence
        (1 x H x T x S), or None."""
        if self.position_bias is None:
            return None
        if isinstance(self.position_bias, DistanceBias) and length == 1:
            # One query at position S - 1: the profile at distances 1 - S .. 0, a view of the folded table. The
            # search's state refers to the table, looked up once (and where it grows), not in every step: the
            # lookup checks the parameters (no gradient is taken in a search, so they do not change).
            table = buffer.get(BIAS_TABLE)
            if table is None or table.size(-1) < keys:
                table = self.keep_state(buffer, BIAS_TABLE, self.position_bias.decoding_table(keys, device), SHARED)
            return row_of(table, keys)
        return self.position_bias(query_pos, key_pos)

    def _columns(self, incremental_state, start: int, length: int, device) -> Tensor:
        """The decoding columns start .. start + length - 1 (1 x length), made once per step for every layer
        (the call's incremental state anchors them)."""
        return self.shared(("columns", start, length), lambda: torch.arange(
            start, start + length, device=device).unsqueeze(0), incremental_state)

    def _positions(self, pad: Optional[Tensor], batch: int, length: int, device) -> Optional[Tensor]:
        """Teacher-forced real positions (B x T), or None where no hook reads them (a distance-only bias
        takes column indices; a transform given drawn positions takes those)."""
        drawn = None if self.forward_context is None else self.forward_context.positions
        reads = (self.transform is not None and drawn is None) or not (
            self.position_bias is None or isinstance(self.position_bias, DistanceBias))
        if not reads:
            return None
        return self.shared(("positions", length), lambda: real_positions(pad, batch, length, device), pad)

    def _rotate(self, q: Tensor, k: Tensor, query_pos: Optional[Tensor], incremental_state, past: Optional[int]):
        """The transform's queries and keys at the call's positions (drawn ones where the side drew them).
        Its rotation is the same in every layer with the same transform: teacher-forced, the positions come
        from the padding mask every layer is given; decoding, every layer of a call is at the same steps
        ``past`` .. (each layer counts them in its cache, all in step), so the call's incremental state
        anchors them, and where every sentence is at those steps the rotation is a view of the transform's
        table of them."""
        context = self.forward_context
        drawn = None if context is None else context.positions
        lengths = None if context is None else context.source_lengths
        if past is not None and drawn is None and lengths is None:
            rotation = self.transform.decoding_rotation(past, q.size(2), q.device, q.dtype)
            return self.transform.rotate(q, rotation), self.transform.rotate_key(k, rotation)
        if drawn is None and query_pos is None:
            query_pos = self._columns(incremental_state, past, q.size(2), q.device)
        positions = query_pos if drawn is None else drawn

        def rotation():
            return self.transform.rotation(positions, q.device, lengths, q.dtype)

        key = ("rotation", type(self.transform), self.transform.extra_repr(), positions.size(-1), q.dtype)
        rotation = self.shared(key, rotation, positions if incremental_state is None else incremental_state)
        return self.transform.rotate(q, rotation), self.transform.rotate_key(k, rotation)

    def _teacher_forced_mask(self, pad: Optional[Tensor], length: int, device) -> Optional[Tensor]:
        """The keys a teacher-forced query may not see: pads, and in causal attention the future (B|1 x 1 x
        T x T)."""
        invalid = None if pad is None else pad[:, None, None, :].bool()
        if self.causal:
            columns = torch.arange(length, device=device)
            future = (columns.unsqueeze(0) > columns.unsqueeze(1))[None, None]  # 1 x 1 x T x T
            invalid = future if invalid is None else invalid | future
        return invalid

    def _distance_bias(self, length: int, device) -> Tensor:
        """The teacher-forced 1 x H x T x T distance bias; the distance grid is shared by the layers of a call,
        and so is the bias itself where it is the same in every layer: ``FIXED`` (no parameters) or one module
        for all layers (``shared_bias``, T5)."""
        bias = self.position_bias
        if bias.ELEMENTWISE:
            grid = self._distance_grid(length, device)
            make = lambda: bias.on_grid(grid)  # noqa: E731
        else:
            distances, index = self.shared(("distance_index", length), lambda: bias.distance_index(length, device))
            make = lambda: bias.gather(distances, index)  # noqa: E731
        if bias.FIXED:
            return self.shared(("fixed_bias", type(bias), bias.extra_repr(), length), make)
        if self.shared_bias:
            return self.shared(("shared_bias", id(bias), length), make)
        return make()

    def _distance_grid(self, length: int, device) -> Tensor:
        """The T x T distances of an ``ELEMENTWISE`` bias, made once per call for every layer."""
        return self.shared(("distance_grid", length), lambda: self.position_bias.distance_grid(length, device))

    def _distance_mask(self, length: int, invalid: Optional[Tensor], q: Tensor) -> Tensor:
        """The teacher-forced distance bias as fused attention's mask for the queries ``q`` (``masked_bias``: the
        ``invalid`` keys at -inf, in q's dtype), made once per call for every layer where the bias is one for all
        of them (``FIXED``, ``shared_bias``), and for all layers at once where they share their work
        (:meth:`DistanceBias.masked_on_grid`, TISA's): each masking is two launches a layer on a GPU, and its
        gradient one (issue 48)."""
        bias = self.position_bias
        if bias.FIXED or self.shared_bias:
            key = ("distance_mask", type(bias), bias.extra_repr(), self.shared_bias and id(bias), length, q.dtype,
                   q.size(0))
            return self.shared(key, lambda: masked_bias(self._distance_bias(length, q.device), invalid, q), invalid)
        if bias.ELEMENTWISE:
            return bias.masked_on_grid(self._distance_grid(length, q.device), invalid, q)
        return masked_bias(self._distance_bias(length, q.device), invalid, q)

    def _pad_history(self, buffer, pad: Optional[Tensor], past: int) -> Optional[str]:
        """The buffer key of the cached key padding mask, or None while no step has had a pad key.

        fairseq's generator never feeds a pad to the decoder, so the mask (and
        the masking) is skipped until a pad appears; then the steps before it
        are recorded as real.
        """
        if pad is None and PAD_KEY not in buffer:
            return None
        if PAD_KEY not in buffer:
            self.keep_state(buffer, PAD_KEY, torch.zeros(pad.size(0), past, dtype=torch.bool, device=pad.device), COPY)
        return PAD_KEY

    def _attend_with_weights(self, q, k, v, bias, masks):
        """The same function as explicit products (fp32 softmax), returning the B x H x T x S weights too."""
        (batch, heads, length, dim), keys = q.shape, k.size(2)
        # The scaling as the product's alpha (beta 0: its input is not read): no operator, no fp16 overflow.
        logits = torch.baddbmm(q.new_empty(()), q.reshape(batch * heads, length, dim),
                               k.reshape(batch * heads, keys, dim).transpose(1, 2), beta=0,
                               alpha=self.head_dim ** -0.5).view(batch, heads, length, keys).float()
        if bias is not None:
            logits = logits + bias
        probs = masked_softmax(logits, None, masks=masks)
        dropped = F.dropout(probs, p=self.dropout) if self.training and self.dropout else probs  # else no operator
        return torch.matmul(dropped.to(v.dtype), v), probs


def scheme_family(prefix, mixer, what, encoder_mixer=None, ctranslate2=families.NO_POSITION_EMBEDDINGS):
    """The presets of a position scheme on content attention (families.py): the scheme in every
    self-attention instead of the token position embeddings, as in the schemes' papers; cross attention
    stays MHA (no distance between a target and a source position; T5 uses no bias there). A scheme
    defined for causal attention only names the encoder's mixer (``encoder_mixer``). Without position
    embeddings, CTranslate2's fairseq converter refuses the model (``ctranslate2``: a converter that takes
    the scheme makes it ``families.CONVERTS``)."""
    return families.Family(
        prefix, what,
        {"encoder_self_mixer": encoder_mixer or mixer, "decoder_self_mixer": mixer,
         "no_token_positional_embeddings": True},
        {"tiny": families.TESTS, "small": families.NO_TABLE, "base": families.NO_TABLE, "big": families.NO_TABLE},
        benchmark="mechanism",
        ctranslate2=ctranslate2)
