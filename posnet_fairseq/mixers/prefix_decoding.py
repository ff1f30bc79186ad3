"""aPosNet's and arPosNet's decoder self-attention step from a table of attention weights (PosNet paper, Eq. 2-3
and 8; section 4's precomputation carried on to the weights).

Their energies depend on positions only (Eq. 8, and Eq. 9-10 in arPosNet's sum), so while no row of a search
has had a pad key (beam search), every row attends at step n over the keys 0..n with the same weights: the
softmax over m <= n of e[h, n, m], row n of the causal weights of positions 0..N-1 (the teacher-forced pass's
without pads). They are made once per table of energies (folded or precomputed: :func:`causal_weights`), kept in
the search's state, and a step reads its row: no energies, masks or softmax per layer and step, and the step
count is a Python int, not a tensor of positions to advance (issue 48: 25 launching operators per gated layer
and step before, against the Transformer's 10). The prefix's values are cached as in the general path
(``Mixer.append_self_attention``); a pad key, a request for the weights or training hands the search over to
the general path (``PositionAttention.forward``) for good: :func:`unfold` makes the state it reads.
"""
from typing import Optional

import torch
from torch import Tensor

from .attention import masked_softmax
from .state_reorder import COPY, SHARED


def step(mixer, buffer, incremental_state, value: Tensor, pad: Optional[Tensor], length: int,
         need_weights: bool) -> Optional[Tensor]:
    """The B x H x 1 x D_h output of a step of ``length`` = 1 query of the mixer's decoder self-attention, or None
    where this path does not take it (more queries, a pad key, the weights asked for, training, no table: the
    caller's general path)."""
    if length > 1 or pad is not None or need_weights or mixer.training or "steps" in buffer:
        unfold(mixer, buffer, value.size(1), value.device)
        return None
    n = buffer.get("step_count", 0)
    weights, kept = buffer.get("step_weights"), True
    if weights is None or n >= weights.size(-1):
        weights, kept = causal_weights(mixer, n), False
        if weights is None:
            unfold(mixer, buffer, value.size(1), value.device)
            return None
    v = mixer.split_heads(mixer.v_proj(value))  # B x H x 1 x D_h
    if not kept:  # (cast once per search, not per step: a step's weights are its row of the table)
        weights = mixer.keep_state(buffer, "step_weights", weights.to(v.dtype), SHARED)
    mixer.keep_state(buffer, "step_count", n + 1, SHARED)
    values, _ = mixer.append_self_attention(incremental_state, buffer, None, None, value=v)
    return torch.matmul(weights[:, n: n + 1, : n + 1], values)  # (H x 1 x S broadcast over the rows)


def causal_weights(mixer, n: int) -> Optional[Tensor]:
    """The fp32 weights H x L x L of the queries 0..L-1 over their keys (row q: the softmax over m <= q, zeros
    after), L > ``n``, from the mixer's tables, grown first to cover step ``n`` (folded tables), or None where a
    term has no table that covers it.

    Made once per set of tables (``mixer.decoding_weights``) for as many positions as the longest step reached
    asks, not for all the tables cover (H N^2 numbers: 32 MB a layer at N = 1,024 and 8 heads): a step beyond
    them makes them anew for twice as many positions (at least the step's), as far as the tables reach; so they
    are made about log2 of the longest step times in all, and their memory is bounded by the output length."""
    for term in mixer.terms:
        if not term.covers(n + 1) and mixer.folded and not mixer.training:
            mixer.term_energies(term, n, n + 1, n + 1)  # grows the folded tables to cover the step
        if not term.covers(n + 1):  # (not folded; or no further than the learned positions reach)
            return None
    tables = [term.table for term in mixer.terms]
    reach = min(table.size(1) for table in tables)
    return mixer.decoding_weights.grow(
        tables, lambda made: made.size(-1) > n,
        lambda made: _weights(mixer, min(max(n + 1, 0 if made is None else 2 * made.size(-1)), reach)))


def _weights(mixer, length: int) -> Tensor:
    """:func:`causal_weights` of ``length`` positions: the mixer's scaled energies of the positions 0..length-1
    (as a teacher-forced pass without pads reads them), softmax over the keys up to each query."""
    device = mixer.terms[0].table.device
    positions = torch.arange(length, device=device).unsqueeze(0)
    energy = mixer.energies(positions, positions, 0, length, length, plain=True)[0]  # H x N x N
    future = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)
    return masked_softmax(energy, future, empty_rows=False)


def unfold(mixer, buffer, batch: int, device):
    """Hands a search that stepped here over to the general path: the positions of the rows (B x 1) and the
    padding of the cached keys (none) that it reads, from the step count."""
    n = buffer.pop("step_count", None)
    if n is None:
        return
    buffer.pop("step_weights", None)
    mixer.keep_state(buffer, "steps", torch.full((batch, 1), n, dtype=torch.long, device=device), COPY)
    mixer.keep_state(buffer, "key_padding_mask", torch.zeros(batch, n, dtype=torch.bool, device=device), COPY)
