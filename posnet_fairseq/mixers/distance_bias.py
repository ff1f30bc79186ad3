"""A logit bias that depends on the key-query distance only: the base of content attention's distance-only
position schemes (ALiBi, T5's bias, KERPLE, TISA, ...; ``content_attention.py`` hosts them).

Such a scheme is a Toeplitz matrix per head: :class:`DistanceBias` evaluates it once per distinct distance and
gathers the pattern from that, and a decoding step reads its row from a table of the distances made once.
"""
import torch
from torch import Tensor, nn

from .derived_cache import DerivedCache
from .fused_attention import masked_bias

# First size of a DistanceBias's decoding table (as PosNet's folded tables, posnet.FOLD_START); it doubles.
FOLD_START = 128


class DistanceBias(nn.Module):
    """A logit bias that depends on the key-query distance j - i only (a Toeplitz matrix per head).

    A subclass gives :meth:`profile`, the bias of every head at a 1-D tensor
    of distances; :meth:`forward` evaluates it once per distance that occurs
    and gathers B x H x T x S from that table, so the cost per logit is that
    of indexing, whatever the profile computes. ``FIXED``: the profile has no
    parameters, so its bias is the same in every layer of a call.

    After ``make_generation_fast_`` (fairseq-generate), a decoding step in eval
    mode reads its row from a table of the profile at distances 1 - N .. 0
    (N = ``FOLD_START`` doubled until the prefix fits), made at the first step
    that needs it, instead of evaluating the profile in every layer at every
    step. The table follows the profile's parameters (``derived_cache.py``):
    a load or a conversion after the first step makes it anew.
    """

    FIXED = False
    # ELEMENTWISE: the profile is a few elementwise operators, evaluated on the T x T distances themselves when
    # teacher-forced: no gather, whose gradient (a scatter, sorted on a GPU) costs several operators per layer.
    ELEMENTWISE = False

    def __init__(self):
        super().__init__()
        self.folded = False
        # (N, device) -> the decoding table (decoding_table), made from the parameters.
        self.decoding_tables = DerivedCache()

    def profile(self, distances: Tensor) -> Tensor:
        """H x N fp32 biases at the N distances j - i (a 1-D long tensor)."""
        raise NotImplementedError(f"{type(self).__name__} must implement profile(distances)")

    def make_generation_fast_(self, **kwargs):
        self.folded = True

    def decoding_row(self, reach: int, device) -> Tensor:
        """The bias of one query at position ``reach`` - 1 over keys 0 .. reach - 1: 1 x H x 1 x reach."""
        return row_of(self.decoding_table(reach, device), reach)

    def decoding_table(self, reach: int, device) -> Tensor:
        """The profile at distances 1 - N .. 0 for some N >= ``reach`` (1 x H x 1 x N), whose last ``reach``
        columns are :meth:`decoding_row`: folded, the table of N = ``FOLD_START`` doubled until ``reach`` fits,
        made from the parameters once (``decoding_tables``); else the profile at N = ``reach``."""
        if not (self.folded and not self.training):
            return self.profile(torch.arange(1 - reach, 1, device=device))[None, :, None, :]
        size = FOLD_START << ((reach - 1) // FOLD_START).bit_length()  # the least N = FOLD_START 2^k >= reach
        return self.decoding_tables.get(tuple(self.parameters()), lambda: self._decoding_table(size, device),
                                        (size, device))

    def _decoding_table(self, size: int, device) -> Tensor:
        with torch.no_grad():
            return self.profile(torch.arange(1 - size, 1, device=device))[None, :, None, :]

    @staticmethod
    def distance_index(length: int, device):
        """The distances -T .. T at which a teacher-forced T x T bias evaluates the profile, and the T x T
        index of j - i into them: the same in every layer of a call (``ForwardContext.shared``)."""
        columns = torch.arange(length, device=device)
        return torch.arange(-length, length + 1, device=device), columns.unsqueeze(0) - columns.unsqueeze(1) + length

    @staticmethod
    def distance_grid(length: int, device) -> Tensor:
        """The T x T distances j - i of a teacher-forced bias (an ``ELEMENTWISE`` profile's input), fp32 (exact
        integers) as the profiles compute."""
        columns = torch.arange(length, device=device, dtype=torch.float32)
        return columns.unsqueeze(0) - columns.unsqueeze(1)

    def on_grid(self, grid: Tensor) -> Tensor:
        """1 x H x T x S: the profile at every distance of ``grid`` (T x S)."""
        return self.profile(grid.flatten()).view(1, -1, *grid.shape)

    def masked_on_grid(self, grid: Tensor, invalid, q: Tensor) -> Tensor:
        """:meth:`on_grid` as fused attention's mask (``fused_attention.masked_bias``) of the queries ``q`` with
        the ``invalid`` keys: the same in every layer of a call but for the profile's parameters."""
        return masked_bias(self.on_grid(grid), invalid, q)

    def gather(self, distances: Tensor, index: Tensor) -> Tensor:
        """1 x H x T x S: the profile at ``distances``, gathered at ``index`` (T x S) into them."""
        return self.profile(distances)[:, index].unsqueeze(0)

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        # Self-attention positions are 0-based and below max(T, S) (a decoding
        # step has T = 1 query at position S - 1), so the distances lie in
        # +-max(T, S): the table's range is known without a device sync.
        reach = max(query_positions.size(-1), key_positions.size(-1))
        distances = key_positions.unsqueeze(1) - query_positions.unsqueeze(2)  # B x T x S, j - i
        table = self.profile(torch.arange(-reach, reach + 1, device=distances.device))  # H x (2 reach + 1)
        return table[:, distances + reach].transpose(0, 1)  # H x B x T x S -> B x H x T x S


def row_of(table: Tensor, reach: int) -> Tensor:
    """The last ``reach`` columns of a :meth:`DistanceBias.decoding_table`: the row of a query at ``reach`` - 1."""
    return table.narrow(-1, table.size(-1) - reach, reach)
