"""Position-based attention: ``rposnet``, ``aposnet``, ``arposnet`` (Schmidt & Di Gangi, PosNet paper).

The attention energies depend on positions only; the content enters through
the values (and the gate, see ``gating.py``)::

    aPosNet (Eq. 8):   e[h,n,m] = <W_q^a p_n, W_k s_m>_h / sqrt(D_h)
    rPosNet (Eq. 9):   e[h,n,m] = <W_q^r p_n, r[idx(n,m)]>_h / sqrt(D_h)
    (Eq. 10)           idx(n,m) = clip(m - floor(gamma n), -K, K) + K
    arPosNet:          the sum of both energies
    out = W_o concat_h( softmax_m(e[h,n,:]) (W_v x)_h )        (Eq. 2-3)

``r`` is a (2K+1) x D table split into H slices of D_h. The sign convention
of Eq. 10 is the authors' code's (``m - floor(gamma n)``); the paper writes
``floor(gamma n) - m``: slot s here is slot 2K - s there, which matters only
when porting weights. Distances are clipped, not windowed: attention stays
global. gamma = 1 in self-attention and the training-set length ratio
(``--length-ratio``, computed by the model and stored in the checkpoint) in
cross-attention, where n is a target and m a source position.

Position inputs (0-based per sentence, from the padding mask; the decoder
input position 0 is the BOS/EOS token; during incremental decoding the query
position is the decoding step):

* rPosNet queries ``p_n`` are the model's own position embeddings (the table
  that is added to the tokens: learned in the ``rposnet_*`` presets, as in the
  paper; fairseq's sinusoids otherwise) passed through a LayerNorm shared by
  all layers of the encoder / of the decoder, then dropout at the model rate;
* aPosNet uses its own sinusoidal vectors ``s_m`` (fairseq's formula, position
  n = row n; ``--aposnet-sinusoids apptek``: the authors' interleaved layout)
  with dropout, no LayerNorm -- also in ``arposnet``, so that source and
  target positions come from one function in cross-attention.
  ``--arposnet-absolute-positions shared`` gives arposnet's aPosNet term the
  rPosNet term's vectors instead (the authors' code), at the self-attention
  sites.

The LayerNorm of the rPosNet positions is nn.LayerNorm, or the authors'
(unbiased variance, eps 1e-8) with ``--posnet-position-norm apptek``; which
source uses which convention is in docs/conventions.md.

Softmax over the valid keys (padding and, in the decoder, the future are
excluded), then attention dropout. Energies and softmax run in fp32 whatever
the model dtype. ``v_proj`` and ``out_proj`` are the Linear layers the
gating wrapper (``gating.py``) replaces.

Inference precomputation (paper section 4): the energies depend on positions
only, so they can be folded into tables of unscaled energies, rPosNet
``H x N x (2K+1)`` (query position x relative slot) and aPosNet ``H x N x M``.
:meth:`PositionAttention.make_generation_fast_` (called by fairseq-generate
and the hub interface) folds them in memory from the eval-mode position
vectors and keeps the parameters, so the tables grow when a longer input
arrives; ``posnet-precompute`` (``posnet_fairseq/precompute.py``) writes a
checkpoint whose mixers hold only the tables (``posnet_precomputed = N`` in
its arguments): inputs longer than N then fail with an error naming N.
"""
import math

import torch
import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding
from torch import nn

from .. import flags
from ..sites import SITES
from .attention import autocast_off, masked_softmax, real_positions
from .base import Mixer
from .clipped_decoding import REUSED_STATE as CLIPPED_STATE, clipped_decoding_step
from .norms import LAYER_NORMS, layer_norm, layer_norm_fp32
from .registry import register_mixer

POSITION_NORM_KEY = "posnet_position_norm"
# First size of the in-memory tables made by make_generation_fast_ (the
# paper's maximum sentence length); they double when an input needs more.
FOLD_START = 128


SINUSOID_LAYOUTS = ("fairseq", "apptek")
ABSOLUTE_POSITIONS = ("sinusoids", "shared")


FLAGS = flags.declare(
    "aPosNet / rPosNet", "posnet",
    flags.Flag("--posnet-max-relative", 16, "rposnet/arposnet: relative distances are clipped to [-K, K] "
               "(the *_big presets use 8)", type=int, metavar="K", check=flags.non_negative_integer),
    flags.Flag("--posnet-position-norm", "torch", "rposnet/arposnet: the LayerNorm of the position queries: torch = "
               "nn.LayerNorm (biased variance, eps 1e-5); apptek = the authors' code (unbiased variance, eps 1e-8)",
               choices=LAYER_NORMS),
    flags.Flag("--aposnet-sinusoids", "fairseq", "aposnet/arposnet: layout of the sinusoidal position vectors: "
               "fairseq = [sin | cos] halves, frequencies 10000^(-k/(D/2-1)); apptek = the authors' code, "
               "interleaved sin/cos, frequencies 10000^(-2k/D)", choices=SINUSOID_LAYOUTS),
    flags.Flag("--arposnet-absolute-positions", "sinusoids", "arposnet: position vectors of the aPosNet term: "
               "sinusoids = its own (--aposnet-sinusoids); shared = the rPosNet term's normalised model positions "
               "(the authors' code: one learned vector for both terms; self-attention sites only)",
               choices=ABSOLUTE_POSITIONS),
    # Written by posnet-precompute into the checkpoint it makes: the mixers are
    # then rebuilt holding only their energy tables of N positions.
    flags.Flag("--posnet-precomputed", 0, "positions of the precomputed energy tables (0: not precomputed)",
               type=int, metavar="N", check=flags.non_negative_integer, internal=True),
)


def sinusoids(length, dim, layout="fairseq"):
    """fp32 sinusoidal vectors of positions 0..length-1 (length x dim), no padding offset.

    ``fairseq``: fairseq's SinusoidalPositionalEmbedding, ``[sin(n w_k) | cos(n w_k)]``
    with ``w_k = 10000^(-k / (D/2 - 1))``, k < D/2 (a zero column when D is odd).
    ``apptek``: the AppTek code's, ``pe[n, 2k] = sin(n w_k)``, ``pe[n, 2k+1] =
    cos(n w_k)`` with ``w_k = 10000^(-2k / D)``.
    """
    if layout == "fairseq":
        return SinusoidalPositionalEmbedding.get_embedding(length, dim)
    angles = torch.arange(length, dtype=torch.float32).unsqueeze(1) * \
        torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.empty(length, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


class PositionAttention(Mixer):
    """Position-only energies (Eq. 8-10) over content values; subclasses pick the energy kinds."""

    ENERGIES = ()  # "a" (aPosNet, Eq. 8) and/or "r" (rPosNet, Eq. 9-10)
    REUSED_STATE = CLIPPED_STATE

    def __init__(self, embed_dim, num_heads, kdim, site, max_relative=16, length_ratio=1.0, dropout=0.0,
                 position_dropout=0.0, positions=None, position_norm=None, precomputed=0,
                 sinusoid_layout="fairseq", shared_positions=False, projections=None):
        super().__init__(embed_dim, num_heads)
        self.kdim = kdim
        self.sinusoid_layout = sinusoid_layout
        # arPosNet as the authors' code: the aPosNet term reads the rPosNet term's position vectors.
        self.shared_positions = shared_positions
        self.site = site  # the sites.Site record
        self.causal = site.causal
        self.max_relative = max_relative
        self.length_ratio = length_ratio
        self.dropout = dropout
        self.position_dropout = position_dropout
        self.scaling = self.head_dim ** -0.5
        self.precomputed = precomputed
        self.folded = False  # True after make_generation_fast_: the tables are a cache that may grow
        # The token position table and the position LayerNorm are owned (and
        # registered) by the encoder/decoder: referred to, not registered again.
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "position_norm", position_norm)
        # A table-form copy (table_form) keeps the trained value and output projections, gated or not.
        self.v_proj, self.out_proj = projections or (nn.Linear(kdim, embed_dim), nn.Linear(embed_dim, embed_dim))
        relative, absolute = "r" in self.ENERGIES, "a" in self.ENERGIES
        self.rel_q_proj = nn.Linear(embed_dim, embed_dim) if relative and not precomputed else None
        self.rel_keys = nn.Parameter(torch.empty(2 * max_relative + 1, embed_dim)) \
            if relative and not precomputed else None
        self.abs_q_proj = nn.Linear(embed_dim, embed_dim) if absolute and not precomputed else None
        self.abs_k_proj = nn.Linear(embed_dim, embed_dim) if absolute and not precomputed else None
        # The energy tables: loaded from a precomputed checkpoint (parameters,
        # not trained), or made in memory by make_generation_fast_ (buffers
        # left out of the state dict).
        for name, kind, width in (("rel_energy", "r", 2 * max_relative + 1), ("abs_energy", "a", precomputed)):
            if precomputed and kind in self.ENERGIES:
                setattr(self, name, nn.Parameter(torch.zeros(num_heads, precomputed, width), requires_grad=False))
            else:
                self.register_buffer(name, None, persistent=False)
        if projections is None:
            self.reset_parameters()

    def reset_parameters(self):
        # As fairseq's MultiheadAttention initialises its projections; the
        # relative table as the authors' code (Xavier on every matrix).
        for proj in (self.rel_q_proj, self.abs_q_proj, self.abs_k_proj, self.v_proj):
            if proj is not None:
                nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)
        if self.rel_keys is not None:
            nn.init.xavier_uniform_(self.rel_keys)

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        relative = "r" in cls.ENERGIES
        length_ratio = 1.0
        if ctx.site.cross and relative:
            length_ratio = ctx.length_ratio
            if length_ratio is None:
                raise ValueError(f"--length-ratio: {cls.NAME} cross-attention needs the length ratio gamma")
        shared = opts.arposnet_absolute_positions == "shared" and cls.ENERGIES == ("a", "r")
        if shared and ctx.site.cross:
            raise ValueError("--arposnet-absolute-positions shared: arposnet cross-attention would need the "
                             "encoder's position vectors for its keys; use it at the self-attention sites only")
        positions = norm = None
        if relative and not opts.posnet_precomputed:
            positions = ctx.embed_positions
            if positions is None:
                raise ValueError(
                    f"{cls.NAME} at the {ctx.site.name} site takes its queries from the model's position embeddings: "
                    f"drop --no-token-positional-embeddings (the paper uses learned ones, "
                    f"{ctx.site.learned_pos_flag}, as the rposnet_* presets do)")
            norm = ctx.shared_module(POSITION_NORM_KEY, lambda: layer_norm(opts.posnet_position_norm, ctx.embed_dim))
        return cls(ctx.embed_dim, ctx.num_heads, ctx.kdim, ctx.site, opts.posnet_max_relative, float(length_ratio),
                   ctx.dropout, ctx.model_dropout, positions, norm, opts.posnet_precomputed,
                   opts.aposnet_sinusoids, shared)

    def max_positions(self):
        if self.precomputed:
            return self.precomputed
        if isinstance(self.positions, LearnedPositionalEmbedding):
            return self.positions.max_positions
        return None

    # ----- position vectors and energy tables (fp32, unscaled) -----

    def _model_positions(self, lo, hi, dropout):
        """LN'd (and dropped-out) model position embeddings of positions lo..hi-1: (hi-lo) x D."""
        module, norm = self.positions, self.position_norm
        offset = module.padding_idx + 1  # fairseq's position index of the first real token
        if isinstance(module, LearnedPositionalEmbedding):
            if hi > module.max_positions:
                raise ValueError(f"{self.NAME}: position {hi - 1} is beyond the {module.max_positions} learned "
                                 "positions (--max-source-positions / --max-target-positions)")
            vectors = module.weight[offset + lo: offset + hi].float()
        else:
            vectors = SinusoidalPositionalEmbedding.get_embedding(offset + hi, self.embed_dim, module.padding_idx)
            vectors = vectors[offset + lo:].to(norm.weight.device)
        vectors = layer_norm_fp32(norm, vectors)
        return F.dropout(vectors, self.position_dropout, dropout)

    def _project(self, proj, vectors):
        return F.linear(vectors, proj.weight.float(), proj.bias.float()).view(-1, self.num_heads, self.head_dim)

    def _relative_table(self, lo, hi, dropout):
        with autocast_off(self.rel_keys):
            queries = self._project(self.rel_q_proj, self._model_positions(lo, hi, dropout))
            keys = self.rel_keys.float().view(-1, self.num_heads, self.head_dim)
            return torch.einsum("nhd,shd->hns", queries, keys)

    def _absolute_table(self, lo, hi, keys, dropout):
        # One set of (dropped-out) vectors for queries and keys, as in
        # self-attention where both are the same positions.
        if self.shared_positions:
            vectors = self._model_positions(0, max(hi, keys), dropout)
        else:
            vectors = F.dropout(sinusoids(max(hi, keys), self.embed_dim, self.sinusoid_layout).to(
                self.abs_q_proj.weight.device), self.position_dropout, dropout)
        with autocast_off(vectors):
            q = self._project(self.abs_q_proj, vectors[lo:hi])
            k = self._project(self.abs_k_proj, vectors[:keys])
            return torch.einsum("nhd,mhd->hnm", q, k)

    def _energies(self, kind, lo, hi, keys=0):
        """Unscaled fp32 energies of query positions lo..hi-1: rPosNet (``kind`` "r") H x n x (2K+1),
        aPosNet ("a") H x n x ``keys``.

        The one path of every form: a table that covers the positions is sliced (posnet-precompute's
        tables, or make_generation_fast_'s in-memory ones, which first grow to cover them: to the
        positions needed, at least double, as far as the position parameters reach); otherwise the
        energies are computed from the position parameters, and a precomputed mixer, which has none,
        refuses the input naming its limit.
        """
        name = "rel_energy" if kind == "r" else "abs_energy"
        needed = max(hi, keys)
        table = getattr(self, name)
        if (table is None or needed > table.size(1)) and self.folded and not self.training:
            self.fold_positions(max(needed, 2 * table.size(1) if table is not None else FOLD_START))
            table = getattr(self, name)
        if table is not None and needed <= table.size(1):
            return table[:, lo:hi].float() if kind == "r" else table[:, lo:hi, :keys].float()
        if self.precomputed:
            raise ValueError(
                f"{self.NAME}: its {'rPosNet' if kind == 'r' else 'aPosNet'} energies were precomputed for "
                f"{self.precomputed} positions (posnet-precompute --max-length {self.precomputed}) but this input "
                f"needs {needed}; precompute again with a larger --max-length from the training checkpoint")
        if kind == "r":
            return self._relative_table(lo, hi, self.training)
        return self._absolute_table(lo, hi, keys, self.training)

    def energies(self, query_pos, key_pos):
        """Scaled fp32 energies B x H x T x S for B x T query and B x S key positions."""
        lo, hi = int(query_pos.min()), int(query_pos.max()) + 1
        rows = (query_pos - lo).unsqueeze(2)  # B x T x 1
        energy = 0.0
        if "r" in self.ENERGIES:
            table = self._energies("r", lo, hi)  # H x n x (2K+1)
            anchor = query_pos if self.length_ratio == 1.0 else \
                torch.floor(query_pos.double() * self.length_ratio).long()
            slot = (key_pos.unsqueeze(1) - anchor.unsqueeze(2)).clamp(-self.max_relative, self.max_relative)
            energy = table[:, rows, slot + self.max_relative]
        if "a" in self.ENERGIES:
            table = self._energies("a", lo, hi, int(key_pos.max()) + 1)  # H x n x M
            energy = energy + table[:, rows, key_pos.unsqueeze(1)]
        return energy.transpose(0, 1) * self.scaling

    # ----- inference precomputation (paper section 4) -----

    @torch.no_grad()
    def _tables(self, length):
        """{table name: eval-mode energies of positions 0..length-1} (rPosNet: no further than the
        learned position table reaches; arPosNet's shared aPosNet term likewise)."""
        limit = self.max_positions() or length
        tables = {}
        if "r" in self.ENERGIES:
            tables["rel_energy"] = self._relative_table(0, min(length, limit), dropout=False)
        if "a" in self.ENERGIES:
            if self.shared_positions:
                length = min(length, limit)
            tables["abs_energy"] = self._absolute_table(0, length, length, dropout=False)
        return tables

    def fold_positions(self, length):
        """In-memory tables of the eval-mode energies of positions 0..length-1 (buffers, not saved)."""
        for name, table in self._tables(length).items():
            setattr(self, name, table)

    def make_generation_fast_(self, **kwargs):
        """Folds the position energies into in-memory tables for decoding (parameters kept)."""
        if not self.precomputed:
            self.folded = True
            self.fold_positions(FOLD_START)

    @torch.no_grad()
    def table_form(self, length):
        """This mixer as posnet-precompute stores it: a new module of the same class holding only the
        eval-mode energy tables of ``length`` positions and this one's value and output projections,
        without W_q, W_k, r or the position inputs (this module is left as it is, sharing those projections)."""
        if self.precomputed:
            raise ValueError(f"{self.NAME} is already precomputed for {self.precomputed} positions")
        form = type(self)(self.embed_dim, self.num_heads, self.kdim, self.site, self.max_relative, self.length_ratio,
                          self.dropout, self.position_dropout, precomputed=length,
                          sinusoid_layout=self.sinusoid_layout, shared_positions=self.shared_positions,
                          projections=(self.v_proj, self.out_proj))
        for name, table in self._tables(length).items():
            getattr(form, name).copy_(table)
        return form.to(table.device).train(self.training)

    # ----- the mixer -----

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask, given only when not
        # incremental) is not used: causality comes from the step indices.
        if before_softmax:
            raise ValueError(f"{self.NAME} does not return pre-softmax logits (before_softmax=True)")
        length, batch, _ = query.shape
        device = query.device
        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if buffer is not None and "a" not in self.ENERGIES:
            if self.site.cross:
                out, probs = self._decode_cross(buffer, value, key_padding_mask, length,
                                                need_weights or need_head_weights)
            else:
                if need_weights or need_head_weights:
                    raise ValueError(f"{self.NAME} decoder self-attention keeps the sum of the keys beyond K, "
                                     "not their weights: it returns no weights while decoding incrementally")
                out, probs = self._decode_self(buffer, value, key_padding_mask, length), None
            self._set_input_buffer(incremental_state, buffer)
            return self.merge_heads(out), self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)
        # Teacher-forced, and aPosNet/arPosNet decoding: the whole prefix is
        # cached, since absolute energies give every key its own weight.
        query_step = None if buffer is None else self.decoding_steps(buffer, batch, length, device)

        if self.site.cross:
            if buffer is not None and "value" in buffer:
                v, key_pos, pad = buffer["value"], buffer["key_positions"], buffer.get("key_padding_mask")
            else:
                v = self.split_heads(self.v_proj(value))
                pad = key_padding_mask
                key_pos = real_positions(pad, batch, value.size(0), device)
                if buffer is not None:  # the encoder side is computed once per sentence
                    buffer.update(value=v, key_positions=key_pos)
                    if pad is not None:
                        buffer["key_padding_mask"] = pad
            if buffer is not None:
                self._set_input_buffer(incremental_state, buffer)
            # Targets are right-padded: the column index is the target position.
            query_pos = query_step if buffer is not None else \
                torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
        else:
            v = self.split_heads(self.v_proj(value))
            pad = key_padding_mask
            if buffer is not None:
                v, pad, key_pos = self.cache_self_attention(incremental_state, buffer, pad,
                                                            pad_key="key_padding_mask", value=v)
                query_pos = query_step
            else:
                key_pos = query_pos = real_positions(pad, batch, length, device)
        keys = v.size(2)

        energy = self.energies(query_pos, key_pos)
        invalid = None if pad is None else pad[:, None, None, :]
        if self.causal:
            step = query_step if query_step is not None else \
                torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
            future = (torch.arange(keys, device=device).view(1, 1, keys) > step.unsqueeze(2)).unsqueeze(1)
            invalid = future if invalid is None else invalid | future
        probs = masked_softmax(energy, invalid)
        dropped = F.dropout(probs, p=self.dropout, training=self.training)
        out = self.merge_heads(torch.matmul(dropped.to(v.dtype), v))
        return out, self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)

    # ----- rPosNet decoding at constant cost per step (docs/constant-cost-decoding.md) -----

    def _step_energies(self, steps):
        """Scaled fp32 rPosNet energies of the query positions ``steps`` (B x T): B x T x H x (2K+1)."""
        lo = int(steps.min())
        table = self._energies("r", lo, int(steps.max()) + 1)  # H x n x (2K+1)
        return table[:, steps - lo].permute(1, 2, 0, 3) * self.scaling

    def _decode_self(self, buffer, value, pad, length):
        """Decoder self-attention, step by step: every key at distance >= K shares the slot-0 energy of
        Eq. 10, so the last K values, the sum of the older ones and their count replace the cache."""
        v = self.split_heads(self.v_proj(value))
        steps = self.decoding_steps(buffer, v.size(0), length, v.device)
        # A causal query sees the slots m - n = -K..0, i.e. 0..K. Every row is at the same step
        # (clipped_decoding_step takes one), so row 0's energies serve the whole batch.
        energy = self._step_energies(steps[:1])[..., : self.max_relative + 1]
        return torch.cat([
            clipped_decoding_step(buffer, int(steps[0, t]), v[:, :, t: t + 1],
                                  None if pad is None else pad[:, t: t + 1], energy[:, t], shared_tail=True,
                                  dropout=self.dropout, training=self.training)
            for t in range(length)], dim=2)

    def _cache_source(self, buffer, value, pad):
        """The encoder side of cross-attention, once per sentence: the values in real-position order
        (pads last, zeroed), their prefix and suffix sums (fp32) and the sentence lengths."""
        v = self.split_heads(self.v_proj(value))  # B x H x S x D_h
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
        buffer["source"] = source
        buffer["prefix"] = torch.cat([zero, torch.cumsum(source.to(acc), dim=2)], dim=2)  # sum of m < j
        buffer["suffix"] = torch.cat([torch.cumsum(source.to(acc).flip(2), dim=2).flip(2), zero], dim=2)  # m >= j
        buffer["source_lengths"] = lengths
        # Only for the attention weights fairseq may ask for, in its column layout.
        buffer["source_positions"], buffer["source_pad"] = positions, pad

    def _decode_cross(self, buffer, value, pad, length, need_weights):
        """Cross-attention, step by step: around the anchor a = floor(gamma n) (Eq. 10) the sources
        m <= a-K share the slot-0 energy and m >= a+K the slot-2K one, so the step attends over the
        2K-1 values in between and the two means from the prefix/suffix sums: O(K D) per step."""
        if "source" not in buffer:
            self._cache_source(buffer, value, pad)
        source, prefix, suffix = buffer["source"], buffer["prefix"], buffer["suffix"]
        lengths = buffer["source_lengths"]
        batch, heads, src_len, head_dim = source.shape
        k = self.max_relative
        steps = self.decoding_steps(buffer, batch, length, source.device)
        energy = self._step_energies(steps)  # B x T x H x (2K+1)
        anchors = steps if self.length_ratio == 1.0 else torch.floor(steps.double() * self.length_ratio).long()
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
            dropped = F.dropout(probs, p=self.dropout, training=self.training)
            outs.append(torch.matmul(dropped.unsqueeze(2), values).to(source.dtype))
            if need_weights:
                weights.append(self._source_weights(buffer, probs, anchor, right_start, left_count, right_count))
        return torch.cat(outs, dim=2), torch.cat(weights, dim=2) if need_weights else None

    def _source_weights(self, buffer, probs, anchor, right_start, left_count, right_count):
        """B x H x 1 x S attention weights in fairseq's column layout: a source in a shared-energy
        group gets its group's probability divided by the group's size (they are equal)."""
        positions, pad = buffer["source_positions"], buffer["source_pad"]
        inner = probs.size(-1) - 2
        group = torch.where(positions <= anchor - self.max_relative, 0,
                            torch.where(positions >= right_start, inner + 1, positions - anchor + self.max_relative))
        size = torch.where(group == 0, left_count, torch.where(group == inner + 1, right_count, 1))
        shares = probs.gather(2, group.unsqueeze(1).expand(-1, probs.size(1), -1)) / size.unsqueeze(1)
        return shares.masked_fill(pad.unsqueeze(1), 0.0).unsqueeze(2)


# Option sets the contract tests run besides the defaults: a K shorter than
# the test sentences (clipping), the paper's learned positions, and the
# paper's GeLU gating (gating.py) at every site.
GATED = {"encoder_self_gating": "on", "decoder_self_gating": "on", "cross_gating": "on"}
RELATIVE_VARIANTS = {
    "k2": {"posnet_max_relative": 2},
    "learned_pos": {"encoder_learned_pos": True, "decoder_learned_pos": True},
    "gated": dict(GATED),
    # The authors' LayerNorm for the positions and the gated values (docs/conventions.md).
    "apptek_norms": {"posnet_position_norm": "apptek", "gating_norm": "apptek", **GATED},
}


@register_mixer("rposnet", sites=SITES, variants=RELATIVE_VARIANTS, uses_length_ratio=True)
class RPosNet(PositionAttention):
    """rPosNet (PosNet paper, Eq. 9-10): position queries x relative-position keys.

    Incremental decoding runs at constant cost per step (``_decode_self``,
    ``_decode_cross``; docs/constant-cost-decoding.md): keys beyond the
    clipping distance share one energy, so their sum replaces their cache.
    """

    NAME = "rposnet"
    ENERGIES = ("r",)


@register_mixer("aposnet", sites=SITES,
                variants={"gated": dict(GATED), "apptek_sinusoids": {"aposnet_sinusoids": "apptek"}})
class APosNet(PositionAttention):
    """aPosNet (PosNet paper, Eq. 8): absolute-position queries x absolute-position keys.

    Decodes with the whole prefix cached: every key has its own energy.
    """

    NAME = "aposnet"
    ENERGIES = ("a",)


@register_mixer("arposnet", sites=SITES, variants={"k2_gated": {"posnet_max_relative": 2, **GATED},
                                                  "apptek_sinusoids": {"aposnet_sinusoids": "apptek"}},
                uses_length_ratio=True)
class ARPosNet(PositionAttention):
    """arPosNet (PosNet paper): the sum of the aPosNet and rPosNet energies.

    Decodes with the whole prefix cached, unlike rPosNet: the absolute part is
    not Toeplitz (it depends on m itself, not on m - n), so keys beyond K no
    longer share an energy and their sum cannot stand in for them.
    """

    NAME = "arposnet"
    ENERGIES = ("a", "r")


# ----- the presets (families.py) -----
# aPosNet / rPosNet as in the paper (Table 2, and its authors'
# configurations): PosNet in the encoder and decoder self-attention, MHA in
# cross-attention, GeLU gating (Eq. 4) on, K = 16 (big: K = 8, section 5.2).
# rPosNet uses learned absolute position embeddings (its queries are that
# table, LayerNorm'd); aPosNet keeps fairseq's sinusoids.
#
# Gating follows the mixers: unless --{site}-gating is given, a layer is gated
# exactly when its mixer is one of this module's. So the placement rows of
# Table 4 are one flag away (--arch rposnet_transformer_base
# --encoder-self-mixer mha: ungated MHA encoder, gated rPosNet decoder;
# --cross-mixer rposnet: gated rPosNet cross-attention), and
# --encoder-self-gating off --decoder-self-gating off gives the ungated rows
# of Table 6. The block imports what it needs itself, so that it stays one
# piece at the end of the module.
from .. import families  # noqa: E402
from .gating import gated_where_mixer_of  # noqa: E402

_GATING_FOLLOWS_MIXERS = gated_where_mixer_of(__name__)
_SIZES = {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)"}
families.declare(
    __name__, "PosNet position-based attention", "posnet",
    families.Family("rposnet_transformer", "gated rPosNet in encoder and decoder self-attention, MHA "
                    "cross-attention, learned positions, K = 16 (big: K = 8)",
                    {"encoder_self_mixer": "rposnet", "decoder_self_mixer": "rposnet", "encoder_learned_pos": True,
                     "decoder_learned_pos": True, **_GATING_FOLLOWS_MIXERS, "posnet_max_relative": 16},
                    {**_SIZES, "base": "PosNet Tables 2, 4, 5 and 6",
                     "big": "PosNet Table 3 (big En-De), K = 8 (section 5.2)"},
                    at_size={"big": {"posnet_max_relative": 8}}, benchmark="mechanism"),
    families.Family("aposnet_transformer", "the same with gated aPosNet and fairseq's sinusoids",
                    {"encoder_self_mixer": "aposnet", "decoder_self_mixer": "aposnet", **_GATING_FOLLOWS_MIXERS,
                     "posnet_max_relative": 16},
                    {**_SIZES, "base": "PosNet Tables 2 and 6", "big": "PosNet Table 3 (big En-De)"},
                    at_size={"big": {"posnet_max_relative": 8}}, benchmark="mechanism"),
)
