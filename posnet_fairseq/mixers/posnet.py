"""Position-based attention: ``rposnet``, ``aposnet``, ``arposnet`` (Schmidt & Di Gangi, PosNet paper).

The attention energies depend on positions only; the content enters through the values (and the gate,
see ``gating.py``)::

    aPosNet (Eq. 8):   e[h,n,m] = <W_q^a p_n, W_k s_m>_h / sqrt(D_h)
    rPosNet (Eq. 9):   e[h,n,m] = <W_q^r p_n, r[idx(n,m)]>_h / sqrt(D_h)
    (Eq. 10)           idx(n,m) = clip(m - floor(gamma n), -K, K) + K
    arPosNet:          the sum of both energies
    out = W_o concat_h( softmax_m(e[h,n,:]) (W_v x)_h )        (Eq. 2-3)

``r`` is a (2K+1) x D table split into H slices of D_h. The sign convention of Eq. 10 is the authors' code's
(``m - floor(gamma n)``); the paper writes ``floor(gamma n) - m``: slot s here is slot 2K - s there, which
matters only when porting weights. Distances are clipped, not windowed: attention stays global. gamma = 1 in
self-attention and the training-set length ratio (``--length-ratio``, computed by the model and stored in the
checkpoint) in cross-attention, where n is a target and m a source position.

Position inputs (0-based per sentence, from the padding mask; the decoder input position 0 is the BOS/EOS
token; during incremental decoding the query position is the decoding step):

* rPosNet queries ``p_n`` are the model's own position embeddings (the table that is added to the tokens:
  learned in the ``rposnet_*`` presets, as in the paper; fairseq's sinusoids otherwise) passed through a
  LayerNorm shared by all layers of the encoder / of the decoder, then dropout at the model rate;
* aPosNet uses its own sinusoidal vectors ``s_m`` (fairseq's formula, position n = row n;
  ``--aposnet-sinusoids apptek``: the authors' interleaved layout) with dropout, no LayerNorm -- also in
  ``arposnet``, so that source and target positions come from one function in cross-attention.
  ``--arposnet-absolute-positions shared`` gives arposnet's aPosNet term the rPosNet term's vectors instead
  (the authors' code), at the self-attention sites.

The LayerNorm of the rPosNet positions is nn.LayerNorm, or the authors' (unbiased variance, eps 1e-8) with
``--posnet-position-norm apptek``; which source uses which convention is in docs/conventions.md.

The mixer composes its energy terms (``position_energies.py``: ``RelativeEnergies``, ``AbsoluteEnergies``,
each with its parameters and its table) and sums them; rPosNet alone decodes in constant state
(``posnet_decoding.py``), aPosNet and arPosNet with the whole prefix cached.

Softmax over the valid keys (padding and, in the decoder, the future are excluded), then attention dropout.
The energies are computed in fp32 whatever the model dtype, and so is the softmax: on the CPU explicitly; on a
GPU, teacher-forced, the energies are fused attention's additive mask in the attention's dtype
(``fused_attention.py``, one kernel forward and one backward), whose softmax runs in fp32. ``v_proj`` and
``out_proj`` are the Linear layers the gating wrapper (``gating.py``) replaces.

Inference precomputation (paper section 4): the energies depend on positions only, so they can be folded into
tables of unscaled energies, rPosNet ``H x N x (2K+1)`` (query position x relative slot) and aPosNet
``H x N x M``. :meth:`PositionAttention.make_generation_fast_` (called by fairseq-generate and the hub
interface) folds them in memory from the eval-mode position vectors and keeps the parameters, so the tables
grow when a longer input arrives; ``posnet-precompute`` (``posnet_fairseq/precompute.py``, also the home of a
mixer's ``table_form``) writes a checkpoint whose mixers hold only the tables (``posnet_precomputed = N`` in
its arguments): inputs longer than N fail naming N.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import families, flags
from ..sites import SITES
from . import posnet_decoding, posnet_layers
from .attention import invalid_keys, masked_softmax, softmax_masks
from .base import Mixer
from .derived_cache import DerivedCache
from .fused_attention import MaskedBias, attention_dtype, position_only_attention
from .gating import gated_where_mixer_of
from .norms import LAYER_NORMS, layer_norm
from .position_energies import AbsoluteEnergies, ModelPositions, RelativeEnergies, rename_old_keys
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


class PositionAttention(Mixer):
    """Position-only energies (Eq. 8-10) over content values: the sum of its energy terms
    (``position_energies.py``), ``relative`` (rPosNet) and/or ``absolute`` (aPosNet); subclasses
    declare which in ``ENERGIES``."""

    ENERGIES = ()  # "r" (rPosNet, Eq. 9-10) and/or "a" (aPosNet, Eq. 8); read by build only
    # Devices where a teacher-forced call attends through fused attention (fused_attention.py): CUDA, whose
    # memory-efficient kernel takes a float mask that needs a gradient, with dropout. On the CPU torch runs
    # such a call as its explicit math, more operators than this mixer's own explicit path.
    FUSED = ("cuda",)

    def __init__(self, embed_dim, num_heads, kdim, site, terms, projections, dropout=0.0):
        super().__init__(embed_dim, num_heads)
        self.kdim = kdim
        self.site = site  # the sites.Site record
        self.causal = site.causal
        self.dropout = dropout
        self.scaling = self.head_dim ** -0.5
        # A table-form copy (posnet-precompute) keeps the trained value and output projections, gated or not.
        self.v_proj, self.out_proj = projections
        # Summed in this order: rPosNet's energies first (arPosNet).
        self.terms = list(terms)
        self.relative = next((t for t in self.terms if isinstance(t, RelativeEnergies)), None)
        self.absolute = next((t for t in self.terms if isinstance(t, AbsoluteEnergies)), None)
        self.precomputed = self.terms[0].precomputed
        self.folded = False  # True after make_generation_fast_: the tables are a cache that may grow
        self.decoding_weights = DerivedCache()  # aPosNet/arPosNet decoder self-attention's (prefix_decoding.py)
        self.ring_dtype = None  # rPosNet's decoding ring's type (indexed_ring.py); None: fp32, int8_ narrows it
        self.side_group, self.side_layers, self.layer = None, (), 0  # its group's layers (posnet_layers.py)

    def reset_parameters(self):
        # As fairseq's MultiheadAttention initialises its projections; the relative table as the authors' code.
        for proj in [p for term in self.terms for p in term.projections()] + [self.v_proj]:
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)
        if self.relative is not None and self.relative.keys is not None:
            nn.init.xavier_uniform_(self.relative.keys)

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        relative, absolute = "r" in cls.ENERGIES, "a" in cls.ENERGIES
        precomputed = opts.posnet_precomputed
        length_ratio = 1.0
        if ctx.site.cross and relative:
            length_ratio = ctx.length_ratio
            if length_ratio is None:
                raise ValueError(f"--length-ratio: {cls.NAME} cross-attention needs the length ratio gamma")
        shared = opts.arposnet_absolute_positions == "shared" and relative and absolute
        if shared and ctx.site.cross:
            raise ValueError("--arposnet-absolute-positions shared: arposnet cross-attention would need the "
                             "encoder's position vectors for its keys; use it at the self-attention sites only")
        positions = None
        if relative and not precomputed:
            if ctx.embed_positions is None:
                raise ValueError(
                    f"{cls.NAME} at the {ctx.site.name} site takes its queries from the model's position embeddings: "
                    f"drop --no-token-positional-embeddings (the paper uses learned ones, "
                    f"{ctx.site.learned_pos_flag}, as the rposnet_* presets do)")
            norm = ctx.shared_module(POSITION_NORM_KEY, lambda: layer_norm(opts.posnet_position_norm, ctx.embed_dim))
            positions = ModelPositions(ctx.embed_positions, norm, ctx.embed_dim, ctx.model_dropout, cls.NAME,
                                       ctx.forward_context)
        # Built in the order their parameters draw from the random generator since the first release.
        projections = (nn.Linear(ctx.kdim, ctx.embed_dim), nn.Linear(ctx.embed_dim, ctx.embed_dim))
        terms = []
        if relative:
            terms.append(RelativeEnergies(ctx.embed_dim, ctx.num_heads, opts.posnet_max_relative, float(length_ratio),
                                          positions, precomputed))
        if absolute:
            terms.append(AbsoluteEnergies(ctx.embed_dim, ctx.num_heads, precomputed, opts.aposnet_sinusoids,
                                          ctx.model_dropout, positions if shared else None, ctx.forward_context))
        mixer = cls(ctx.embed_dim, ctx.num_heads, ctx.kdim, ctx.site, terms, projections, ctx.dropout)
        mixer.forward_context = ctx.forward_context
        if ctx.forward_context is not None and not precomputed:
            mixer.side_group = (ctx.site.name, cls.NAME, *(term.settings() for term in terms))
            mixer.side_layers = ctx.forward_context.register(mixer.side_group, mixer)
            mixer.layer = len(mixer.side_layers) - 1
        mixer.reset_parameters()
        return mixer

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        rename_old_keys(state_dict, prefix, {"relative": self.relative, "absolute": self.absolute})
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def max_positions(self):
        if self.precomputed:
            return self.precomputed
        return None if self.relative is None else self.relative.limit()

    def term_energies(self, term, lo, hi, keys=0, scale=1.0):
        """fp32 energies of ``term`` for query positions lo..hi-1 (and ``keys`` key positions, aPosNet), times
        ``scale`` (1: unscaled): H x n x width.

        The one path of every form: a table that covers the positions is read (posnet-precompute's
        tables, or make_generation_fast_'s in-memory ones, which first grow to cover them: to the
        positions needed, at least double, as far as the position parameters reach); otherwise the
        energies are computed from the position parameters, and a precomputed mixer, which has none,
        refuses the input naming its limit.
        """
        needed = max(hi, keys)
        if not term.covers(needed) and self.folded and not self.training:
            self.fold_positions(max(needed, 2 * term.table.size(1) if term.table is not None else FOLD_START))
        if term.covers(needed):
            table = term.lookup(lo, hi, keys)
            return table if scale == 1.0 else table * scale
        if self.precomputed:
            raise ValueError(
                f"{self.NAME}: its {term.LABEL} energies were precomputed for {self.precomputed} positions "
                f"(posnet-precompute --max-length {self.precomputed}) but this input needs {needed}; "
                "precompute again with a larger --max-length from the training checkpoint")
        return term.compute(lo, hi, keys, self.training, scale)

    def energies(self, query_pos, key_pos, lo=None, hi=None, keys=None, shared=False, pad=None, plain=False,
                 tables=None):
        """Scaled fp32 energies B x H x T x S for B x T query and B x S key positions: the terms' sum. ``lo``
        and ``hi``, the least query position and one past the largest, and ``keys``, one past the largest key
        position, are read from the device unless given. ``shared``: a teacher-forced self-attention call,
        whose index grids every layer shares (they depend on ``pad`` and shapes only). ``plain``: all rows'
        positions are 0..T-1 and 0..S-1 (no pads): one row of energies for all, 1 x H x T x S. ``tables``: each
        term's scaled table, read instead of the term's own (posnet_layers.py: every layer's, as heads)."""
        lo, hi = int(query_pos.min()) if lo is None else lo, int(query_pos.max()) + 1 if hi is None else hi
        rows = None if plain else (query_pos - lo if lo else query_pos)  # B x T, into the table's dim 1
        query_pos, key_pos = (query_pos[:1], key_pos[:1]) if plain else (query_pos, key_pos)
        energy = None
        for i, term in enumerate(self.terms):
            # Scaled in the table (H x n x width), not in the B x H x T x S read: a computed one in its product.
            table = tables[i] if tables else self.term_energies(term, lo, hi, term.keys_needed(key_pos, keys),
                                                                self.scaling)
            grid = (term.TABLE_NAME, *term.export_index().values(), hi, query_pos.shape, key_pos.size(1))
            columns = self.shared(grid, lambda: term.columns(query_pos, key_pos, plain), pad) if shared else \
                term.columns(query_pos, key_pos, plain)
            energy = term.read(table, rows, columns) if energy is None else energy + term.read(table, rows, columns)
        return energy

    # ----- inference precomputation (paper section 4) -----

    @torch.no_grad()
    def tables(self, length):
        """Each term's eval-mode energies of positions 0..length-1 (no further than the learned position
        table reaches, for a term that reads the model's positions)."""
        return [term.compute(0, n, n, training=False) for term in self.terms
                for n in [min(length, term.limit() or length)]]

    def fold_positions(self, length):
        """In-memory tables of the eval-mode energies of positions 0..length-1 (buffers, not saved)."""
        for term, table in zip(self.terms, self.tables(length)):
            term.table = table

    def make_generation_fast_(self, **kwargs):
        """Folds the position energies into in-memory tables for decoding (parameters kept)."""
        if not self.precomputed:
            self.folded = True
            self.fold_positions(FOLD_START)

    def int8_(self):
        """Called by ``models/int8.py`` once the model's linear layers are int8: rPosNet's decoding ring is then kept
        in fp16, half the bytes that every step reads (docs/constant-cost-decoding.md, "What int8 narrows");
        an fp32 model's stays fp32."""
        self.ring_dtype = torch.float16

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's future mask, given only when not incremental) is unused: causality comes from the steps.
        if before_softmax:
            raise ValueError(f"{self.NAME} does not return pre-softmax logits (before_softmax=True)")
        length, batch, _ = query.shape
        device = query.device
        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if buffer is not None and (self.absolute is None or not self.site.cross):
            out = posnet_decoding.decode_step(self, buffer, incremental_state, value, key_padding_mask, length,
                                              need_weights or need_head_weights)
            if out is not None:
                return out[0], self.fairseq_weights(out[1], query.dtype, need_weights, need_head_weights)
        # Teacher-forced, and aPosNet/arPosNet decoding with pads: the whole prefix is
        # cached, since absolute energies give every key its own weight.
        query_step, first = (None, None) if buffer is None else \
            posnet_decoding.cross_steps(self, buffer, batch, length, device) if self.site.cross else \
            (self.decoding_steps(buffer, batch, length, device), None)
        if self.site.cross:
            v, key_pos, pad = posnet_decoding.cross_values(self, value, key_padding_mask, buffer, batch, device)
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
        fused = not (weights := need_weights or need_head_weights) and buffer is None and device.type in self.FUSED
        dtype = attention_dtype(v) if fused else None  # fused: the energies as the additive mask in this dtype
        if buffer is None and not self.site.cross and not weights and posnet_layers.grouped(self):
            return self.merge_heads(posnet_layers.layer_heads(self, v, pad, batch, length, dtype)), None
        if buffer is None and not self.site.cross:
            energy, masks = posnet_layers.teacher_forced_self(self, pad, batch, length, device, dtype)
        else:  # query positions: decoding self-attention's the last of its keys; teacher-forced cross's 0 .. T - 1
            keys = v.size(2)  # (cross: the source length bounds the key positions; self: the cache's; no read)
            bounds = (0, length, keys) if buffer is None else (first, first + length, keys) if self.site.cross else \
                (keys - length, keys, keys)
            energy = self.energies(query_pos, key_pos, *bounds, plain=buffer is None and pad is None)
            masks = softmax_masks(invalid_keys(pad, self.causal, query_step, batch, length, v.size(2), device),
                                  pad is not None)
            energy = energy if dtype is None else MaskedBias.apply(energy, masks[0], dtype)
        if fused:
            return self.merge_heads(position_only_attention(energy, masks[1], v, self.dropout * self.training,
                                                            self.shared)), None
        probs = masked_softmax(energy, None, masks=masks).expand(batch, -1, -1, -1)  # (plain: one row for all)
        dropped = F.dropout(probs, p=self.dropout, training=self.training)
        out = self.merge_heads(torch.matmul(dropped.to(v.dtype), v))
        return out, self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)


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

    Incremental decoding runs at constant cost per step (``posnet_decoding.py``,
    docs/constant-cost-decoding.md): keys beyond the clipping distance share
    one energy, so their sum replaces their cache.
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
# aPosNet / rPosNet as in the paper (Table 2, and its authors' configurations): PosNet in the encoder and
# decoder self-attention, MHA in cross-attention, GeLU gating (Eq. 4) on, K = 16 (big: K = 8, section 5.2).
# rPosNet uses learned absolute position embeddings (its queries are that table, LayerNorm'd); aPosNet keeps
# fairseq's sinusoids.
#
# Gating follows the mixers: unless --{site}-gating is given, a layer is gated exactly when its mixer is one of
# this module's. So the placement rows of Table 4 are one flag away (--arch rposnet_transformer_base
# --encoder-self-mixer mha: ungated MHA encoder, gated rPosNet decoder; --cross-mixer rposnet: gated rPosNet
# cross-attention), and --encoder-self-gating off --decoder-self-gating off gives the ungated rows of Table 6.
_GATING_FOLLOWS_MIXERS = gated_where_mixer_of(__name__)
_SIZES = {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)"}
_BOTH = dict(at_size={"big": {"posnet_max_relative": 8}}, benchmark="mechanism", ctranslate2=families.OWN_PARAMETERS)
families.declare(
    __name__, "PosNet position-based attention", "posnet",
    families.Family("rposnet_transformer", "gated rPosNet in encoder and decoder self-attention, MHA "
                    "cross-attention, learned positions, K = 16 (big: K = 8)",
                    {"encoder_self_mixer": "rposnet", "decoder_self_mixer": "rposnet", "encoder_learned_pos": True,
                     "decoder_learned_pos": True, **_GATING_FOLLOWS_MIXERS, "posnet_max_relative": 16},
                    {**_SIZES, "base": "PosNet Tables 2, 4, 5 and 6",
                     "big": "PosNet Table 3 (big En-De), K = 8 (section 5.2)"}, **_BOTH),
    families.Family("aposnet_transformer", "the same with gated aPosNet and fairseq's sinusoids",
                    {"encoder_self_mixer": "aposnet", "decoder_self_mixer": "aposnet", **_GATING_FOLLOWS_MIXERS,
                     "posnet_max_relative": 16},
                    {**_SIZES, "base": "PosNet Tables 2 and 6", "big": "PosNet Table 3 (big En-De)"}, **_BOTH),
)
