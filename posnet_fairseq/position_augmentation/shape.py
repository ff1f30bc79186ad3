"""SHAPE, shifted absolute position embedding (Kiyono et al., EMNLP 2021, "SHAPE: Shifted Absolute Position
Embedding for Transformers", section 3).

In training, every position of a sentence is shifted by one offset k drawn for that sentence,
uniformly from {0, ..., K}::

    p_i -> p_i + k,   k ~ U{0, ..., K}

so that the model cannot rely on where a sentence starts, only on where its tokens are relative to each
other (shift invariance). At test time k = 0: the positions are the plain ones, and the decoder's
incremental positions equal its teacher-forced ones. The encoder and decoder each draw their own k.
"""
from typing import Optional

import torch
from torch import Tensor


def shifted(positions: Tensor, pad: Optional[Tensor], max_offset: int) -> Tensor:
    """B x T 0-based ``positions`` plus one offset per sentence, drawn from {0, ..., ``max_offset``} with torch's
    random generator (fairseq seeds it per update); pad columns (``pad`` True) keep position 0."""
    offsets = torch.randint(0, max_offset + 1, (positions.size(0), 1), device=positions.device)
    moved = positions + offsets
    return moved if pad is None else moved.masked_fill(pad, 0)
