"""The energy terms of PositionAttention (posnet.py): aPosNet's and rPosNet's, one module each.

A term owns its parameters and its table of unscaled fp32 energies (``table``): loaded from a posnet-precompute
checkpoint (a parameter, not trained, the term then has nothing else), made in memory by
``PositionAttention.make_generation_fast_`` (a buffer left out of the state dict), or None. The mixer sums the
terms' energies (arPosNet: rPosNet's plus aPosNet's) and decides when a table is folded or grown; a term
computes its energies of query positions lo..hi-1 (:meth:`EnergyTerm.compute`, times a ``scale``: the mixer's
1/sqrt(D_h) where it attends with them, 1 for a table) and reads them out of a table
(:meth:`EnergyTerm.lookup`, :meth:`EnergyTerm.read`).

rPosNet's constant-state decoding is in ``posnet_decoding.py``; aPosNet and
arPosNet decode with the whole prefix cached (``PositionAttention.forward``).
"""
import math
import warnings
from typing import Optional

import torch
import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding
from torch import Tensor, nn

from .attention import autocast_off
from .derived_cache import DerivedCache
from .norms import layer_norm_fp32


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


OLD_LAYOUT = ("a PosNet checkpoint from before the energy terms were modules: its weights load, but its "
              "optimizer state does not fit the new parameter order; resume training from it with --reset-optimizer")


def rename_old_keys(state_dict, prefix, terms):
    """Renames, in ``state_dict``, the keys of a PosNet mixer at ``prefix`` from a checkpoint from before the
    energy terms were modules (regression fixtures, posnet-precompute checkpoints): their parameters sat on
    the mixer under the terms' old names. ``terms``: {attribute name on the mixer: term or None}."""
    for name, term in terms.items():
        for old, new in (term.OLD_NAMES.items() if term is not None else ()):
            for key in [k for k in state_dict if k == prefix + old or k.startswith(f"{prefix}{old}.")]:
                state_dict[f"{prefix}{name}.{new}{key[len(prefix + old):]}"] = state_dict.pop(key)
                # The weights carry over; the parameter order, and with it a stored optimizer state, does not.
                warnings.warn(OLD_LAYOUT)


class ModelPositions:
    """rPosNet's position queries p_n: the model's own position embeddings, through the LayerNorm shared
    by all layers of the encoder / of the decoder, then dropout at the model rate.

    Not a module: the embedding and the LayerNorm are owned (and registered) by the encoder/decoder,
    so a mixer refers to them without registering them again. The LayerNorm'd vectors are therefore the
    same in every layer of a call: made once for all of them (``forward_context``, the side's
    :class:`~.forward_context.ForwardContext`), each layer drawing its own dropout.
    """

    def __init__(self, embedding, norm, dim: int, dropout: float, owner: str, forward_context=None):
        self.embedding, self.norm, self.dim, self.dropout, self.owner = embedding, norm, dim, dropout, owner
        self.forward_context = forward_context

    def limit(self) -> Optional[int]:
        """Positions the embedding has (None: sinusoidal, no limit)."""
        return self.embedding.max_positions if isinstance(self.embedding, LearnedPositionalEmbedding) else None

    def __call__(self, lo: int, hi: int, training: bool, layers: int = 0) -> Tensor:
        """LN'd (and dropped-out) vectors of positions lo..hi-1: (hi-lo) x D, fp32; ``layers`` > 0: layers x
        (hi-lo) x D, each layer's own dropout."""
        if self.forward_context is None:
            vectors = self.normed(lo, hi)
        else:
            vectors = self.forward_context.shared(("model_positions", id(self.norm), lo, hi),
                                                  lambda: self.normed(lo, hi))
        return F.dropout(vectors.expand(layers, -1, -1) if layers else vectors, self.dropout, training)

    def normed(self, lo: int, hi: int) -> Tensor:
        """The LN'd vectors of positions lo..hi-1, before dropout."""
        module, norm = self.embedding, self.norm
        offset = module.padding_idx + 1  # fairseq's position index of the first real token
        if isinstance(module, LearnedPositionalEmbedding):
            if hi > module.max_positions:
                raise ValueError(f"{self.owner}: position {hi - 1} is beyond the {module.max_positions} learned "
                                 "positions (--max-source-positions / --max-target-positions)")
            vectors = module.weight[offset + lo: offset + hi].float()
        else:
            vectors = SinusoidalPositionalEmbedding.get_embedding(offset + hi, self.dim, module.padding_idx)
            vectors = vectors[offset + lo:].to(norm.weight.device)
        return layer_norm_fp32(norm, vectors)


class EnergyTerm(nn.Module):
    """One energy term: unscaled fp32 energies H x n x width of query positions lo..hi-1."""

    LABEL = ""  # the paper's name of the term, in error messages
    # The table's name in posnet-precompute's .npy export, and in the state dicts of checkpoints from
    # before the terms were modules (their keys are renamed on load: PositionAttention._load_from_state_dict).
    TABLE_NAME = ""
    OLD_NAMES = {}  # {name in those checkpoints: name here}
    AXES = ()  # of the table, for the export's index
    # Its projections build the energy tables in fp32 from their weights (_project), once per table and not
    # per decoding step: int8 decoding (models/int8.py) leaves these children in fp32.
    FP32_LINEARS = ("q_proj", "k_proj")

    def __init__(self, embed_dim, num_heads, precomputed, width):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.precomputed = precomputed
        if precomputed:
            self.table = nn.Parameter(torch.zeros(num_heads, precomputed, width), requires_grad=False)
        else:
            self.register_buffer("table", None, persistent=False)

    def covers(self, needed: int) -> bool:
        return self.table is not None and needed <= self.table.size(1)

    def projected(self, lo: int, hi: int, keys: int, training: bool):
        """The term's position vectors (:meth:`vectors`) through its projections, one n_i x H x D_h tensor each
        (the vectors' rows :meth:`rows`)."""
        vectors = self.vectors(lo, hi, keys, training)
        return [self._project(proj, vectors[a:b]) for proj, (a, b) in zip(self.projections(), self.rows(lo, hi, keys))]

    @staticmethod
    def read(table: Tensor, rows: Optional[Tensor], columns: Optional[Tensor]) -> Tensor:
        """Energies B x H x T x S from ``table`` (H x n x width): its rows ``rows`` (B x T; None: the table's
        rows are the query positions 0..T-1 of every row, B = 1), its columns ``columns`` (B x 1 x T x S, from
        ``columns``; None: all of them).

        A table that needs a gradient is read with index_select and gather, whose gradients are sums
        (index_add, scatter_add): an indexed read's gradient sorts its indices, several kernels per layer on a
        GPU (issue 48); elsewhere one indexed read is one operator."""
        if rows is not None and not table.requires_grad:
            return table[:, rows.unsqueeze(2), columns.squeeze(1)].transpose(0, 1)
        picked = table.unsqueeze(0) if rows is None else table.index_select(1, rows.reshape(-1)).view(
            table.size(0), *rows.shape, table.size(2)).transpose(0, 1)  # B x H x T x width
        # (gathered in the batch-first order: a contiguous result, which the softmax need not copy)
        return picked if columns is None else picked.gather(3, columns.expand(-1, table.size(0), -1, -1))

    def _project(self, proj, vectors):
        return F.linear(vectors, proj.weight.float(), proj.bias.float()).view(-1, self.num_heads, self.head_dim)

    @staticmethod
    def product(queries: Tensor, keys: Tensor, scale: float, training: bool) -> Tensor:
        """H x n x s energies ``scale`` <q_n, k_s>_h of n x H x D_h queries and s x H x D_h keys: one batched
        product over the heads, read in place (strided). In training the scaling is its alpha (beta 0: the input
        is not read), no operator of its own (a launch on a GPU, issue 48); in eval the unscaled product is
        scaled as a table's lookup is (PositionAttention.term_energies), so that a precomputed checkpoint gives
        bitwise the energies of the parameters it was made from."""
        energies = torch.baddbmm(queries.new_empty(()), queries.transpose(0, 1), keys.permute(1, 2, 0), beta=0,
                                 alpha=scale if training else 1.0)
        return energies if training or scale == 1.0 else energies * scale


class RelativeEnergies(EnergyTerm):
    """rPosNet's energies (Eq. 9-10): ``e[h,n,m] = <W_q^r p_n, r[idx(n,m)]>_h``, with
    ``idx(n,m) = clip(m - floor(gamma n), -K, K) + K``; the table is H x N x (2K+1), by relative slot."""

    LABEL = "rPosNet"
    TABLE_NAME = "rel_energy"
    OLD_NAMES = {"rel_q_proj": "q_proj", "rel_keys": "keys", "rel_energy": "table"}
    AXES = ("head", "query position", "relative slot m - floor(gamma n) + K")

    def __init__(self, embed_dim, num_heads, max_relative, length_ratio=1.0, positions=None, precomputed=0):
        super().__init__(embed_dim, num_heads, precomputed, 2 * max_relative + 1)
        self.max_relative, self.length_ratio = max_relative, length_ratio
        self.positions = positions  # ModelPositions (None in a precomputed term)
        self.q_proj = None if precomputed else nn.Linear(embed_dim, embed_dim)
        self.keys = None if precomputed else nn.Parameter(torch.empty(2 * max_relative + 1, embed_dim))
        # The table's rows and weights for decoder self-attention (posnet_decoding.decoding_rows).
        self.decoding_rows = DerivedCache()

    def projections(self):
        return [] if self.q_proj is None else [self.q_proj]

    def limit(self) -> Optional[int]:
        return self.positions.limit()

    def keys_needed(self, key_pos: Tensor, bound: Optional[int] = None) -> int:
        return 0  # the table's width is the 2K+1 slots, whatever the keys

    def vectors(self, lo, hi, keys, training, layers=0):
        return self.positions(lo, hi, training, layers)

    def rows(self, lo, hi, keys):
        return [(0, hi - lo)]  # the queries'

    def settings(self):
        return self.max_relative, self.length_ratio, id(self.positions.norm)

    @staticmethod
    def stacked_keys(terms, projected):
        """The keys of every layer's term (posnet_layers.py): the relative tables, L x (2K+1) x D."""
        return torch.stack([term.keys for term in terms]).float()

    def compute(self, lo, hi, keys, training, scale=1.0):
        with autocast_off(self.keys):
            queries, = self.projected(lo, hi, keys, training)
            keys = self.keys.float().view(-1, self.num_heads, self.head_dim)
            return self.product(queries, keys, scale, training)

    def lookup(self, lo, hi, keys):
        return self.table[:, lo:hi].float()

    def anchors(self, query_pos: Tensor) -> Tensor:
        """floor(gamma n) of Eq. 10: the key position of slot K."""
        return query_pos if self.length_ratio == 1.0 else torch.floor(query_pos.double() * self.length_ratio).long()

    def columns(self, query_pos, key_pos, plain=False):
        """The slots idx(n,m) of Eq. 10 of B x T query and B x S key positions: B x 1 x T x S, the columns of
        the energies in a table's rows (``plain`` too: a row of the table is a query position's)."""
        slot = (key_pos.unsqueeze(1) - self.anchors(query_pos).unsqueeze(2)).clamp(-self.max_relative,
                                                                                   self.max_relative)
        return (slot + self.max_relative).unsqueeze(1)

    def table_form(self, table):
        """A term holding only ``table`` (H x N x (2K+1)), as posnet-precompute stores it."""
        form = RelativeEnergies(self.num_heads * self.head_dim, self.num_heads, self.max_relative,
                                self.length_ratio, precomputed=table.size(1))
        form.table.copy_(table)
        return form

    def export_index(self):
        return {"max_relative": self.max_relative, "length_ratio": self.length_ratio}


class AbsoluteEnergies(EnergyTerm):
    """aPosNet's energies (Eq. 8): ``e[h,n,m] = <W_q^a s_n, W_k s_m>_h``; the table is H x N x N.

    ``s`` are sinusoids (``sinusoid_layout``, dropout at the model rate), or, with ``shared`` (arPosNet
    as the authors' code: ``--arposnet-absolute-positions shared``), rPosNet's :class:`ModelPositions`.
    The sinusoids are the same in every layer: made once per call for all of them where the term has the
    side's ``forward_context``, each layer drawing its own dropout.
    """

    LABEL = "aPosNet"
    TABLE_NAME = "abs_energy"
    OLD_NAMES = {"abs_q_proj": "q_proj", "abs_k_proj": "k_proj", "abs_energy": "table"}
    AXES = ("head", "query position", "key position")

    def __init__(self, embed_dim, num_heads, precomputed=0, sinusoid_layout="fairseq", position_dropout=0.0,
                 shared=None, forward_context=None):
        super().__init__(embed_dim, num_heads, precomputed, precomputed)
        self.sinusoid_layout, self.position_dropout, self.shared = sinusoid_layout, position_dropout, shared
        self.forward_context = forward_context
        self.q_proj = None if precomputed else nn.Linear(embed_dim, embed_dim)
        self.k_proj = None if precomputed else nn.Linear(embed_dim, embed_dim)

    def projections(self):
        return [] if self.q_proj is None else [self.q_proj, self.k_proj]

    def limit(self) -> Optional[int]:
        return None if self.shared is None else self.shared.limit()

    def keys_needed(self, key_pos: Tensor, bound: Optional[int] = None) -> int:
        """Key positions the table must have: ``bound`` where the caller knows it, else read from the device."""
        return int(key_pos.max()) + 1 if bound is None else bound

    def vectors(self, lo, hi, keys, training, layers=0):
        """One set of (dropped-out) vectors of positions 0..max(hi, keys)-1 for queries and keys, as in
        self-attention where both are the same positions; ``layers`` > 0: one set per layer."""
        if self.shared is not None:
            return self.shared(0, max(hi, keys), training, layers)
        n, dim, device = max(hi, keys), self.q_proj.in_features, self.q_proj.weight.device

        def made():
            return sinusoids(n, dim, self.sinusoid_layout).to(device)

        vectors = made() if self.forward_context is None else self.forward_context.shared(
            ("sinusoids", n, dim, self.sinusoid_layout, device), made)
        return F.dropout(vectors.expand(layers, -1, -1) if layers else vectors, self.position_dropout, training)

    def rows(self, lo, hi, keys):
        return [(lo, hi), (0, keys)]  # the queries', the keys'

    def settings(self):
        return self.sinusoid_layout, self.position_dropout, None if self.shared is None else id(self.shared.norm)

    @staticmethod
    def stacked_keys(terms, projected):
        """The keys of every layer's term (posnet_layers.py): their projected vectors, L x M x D."""
        return projected[1]

    def compute(self, lo, hi, keys, training, scale=1.0):
        with autocast_off(self.q_proj.weight):
            return self.product(*self.projected(lo, hi, keys, training), scale, training)

    def lookup(self, lo, hi, keys):
        return self.table[:, lo:hi, :keys].float()

    def columns(self, query_pos, key_pos, plain=False):
        """The columns of the energies of B x T query and B x S key positions in a table's rows: the key
        positions, B x 1 x T x S (expanded over T); None where ``plain`` (0..S-1: the table's own columns)."""
        return None if plain else key_pos.view(key_pos.size(0), 1, 1, key_pos.size(1)).expand(
            -1, -1, query_pos.size(1), -1)

    def table_form(self, table):
        """A term holding only ``table`` (H x N x N), as posnet-precompute stores it."""
        form = AbsoluteEnergies(self.num_heads * self.head_dim, self.num_heads, precomputed=table.size(1))
        form.table.copy_(table)
        return form

    def export_index(self):
        return {}
