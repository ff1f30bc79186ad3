"""Numeric helpers of the attention-like mixers: real positions, key masks, masked softmax, fp32 islands."""
from typing import Optional

import torch
from torch import Tensor


def autocast_off(tensor: Tensor):
    """A context in which arithmetic on ``tensor``'s device runs in the dtypes it is given.

    Under ``--amp`` (autocast) F.linear, matmul and einsum run in fp16/bf16
    even on fp32 inputs; the parts whose numerics need fp32 (position energy
    tables, AAN+'s WET log-weights) run inside this context.
    """
    return torch.autocast(device_type=tensor.device.type, enabled=False)


def real_positions(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tensor:
    """0-based per-sentence positions, B x T, from a B x T padding mask (True = pad).

    fairseq left-pads sources and right-pads targets; either way the first real
    token gets position 0. Pad columns get position 0 too (they are masked).
    """
    if padding_mask is None:
        return torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
    real = (~padding_mask).long()
    return ((torch.cumsum(real, dim=1) - 1) * real).clamp_(min=0)


def invalid_keys(pad: Optional[Tensor], causal: bool, query_step: Optional[Tensor], batch: int, length: int,
                 keys: int, device) -> Optional[Tensor]:
    """The keys a query may not see (B x 1 x T x S, True = masked): pads (``pad`` B x S), and with ``causal``
    the keys after the query's step (``query_step`` B x T while decoding, else the column 0 .. T - 1)."""
    invalid = None if pad is None else pad[:, None, None, :]
    if causal:
        step = query_step if query_step is not None else \
            torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
        future = (torch.arange(keys, device=device).view(1, 1, keys) > step.unsqueeze(2)).unsqueeze(1)
        invalid = future if invalid is None else invalid | future
    return invalid


def softmax_masks(invalid: Optional[Tensor], empty_rows: bool = True):
    """``(hidden, empty)`` of :func:`masked_softmax`: the keys it masks with -inf, and the rows without any valid
    key (None where ``empty_rows`` is False), from the ``invalid`` keys. They depend on masks only, so that
    the layers of a call can share them."""
    if invalid is None or not empty_rows:
        return invalid, None
    empty = invalid.all(dim=-1, keepdim=True)
    return invalid & ~empty, empty


def masked_softmax(logits: Tensor, invalid: Optional[Tensor], empty_rows: bool = True, masks=None) -> Tensor:
    """Softmax over the last dim with ``invalid`` (bool, broadcastable) keys excluded.

    A row without any valid key (only a pad query can have one) would be NaN
    after -inf masking: it sees everything, then its weights are zeroed.
    ``empty_rows`` False says that no row can be empty (no pad is masked: a
    causal row sees itself), and spares the three operators that find them.
    ``masks``: :func:`softmax_masks` of them, made already (``invalid`` is then not read), as they are or
    unsqueezed to broadcast against ``logits``: the keys to hide and the rows to zero, in no other form.
    """
    hidden, empty = softmax_masks(invalid, empty_rows) if masks is None else masks
    probs = torch.softmax(logits if hidden is None else logits.masked_fill(hidden, float("-inf")), dim=-1)
    return probs if empty is None else probs.masked_fill(empty, 0.0)


# LayerNorm conventions a flag can choose (``--gating-norm``, ``--posnet-position-norm``):


def sentence_lengths(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tensor:
    if padding_mask is None:
        return torch.full((batch,), length, device=device, dtype=torch.long)
    return (~padding_mask).long().sum(dim=1)
