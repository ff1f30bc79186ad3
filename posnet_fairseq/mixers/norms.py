"""The LayerNorm conventions a flag can choose (``--gating-norm``, ``--posnet-position-norm``).

torch's nn.LayerNorm, or the one of the AppTek PosNet code (docs/conventions.md).
"""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

LAYER_NORMS = ("torch", "apptek")


class AppTekLayerNorm(nn.LayerNorm):
    """The LayerNorm of the AppTek PosNet code (``pytorchmt`` ``LayerNormalization``).

    ``(x - mean) / sqrt(var + 1e-8) * weight + bias`` with the *unbiased*
    variance (divided by D - 1), where nn.LayerNorm divides by D and adds
    1e-5. Same parameters (and state-dict keys) as nn.LayerNorm; computed in
    fp32 and cast back to the input's dtype.
    """

    def __init__(self, dim: int):
        super().__init__(dim, eps=1e-8)

    def forward(self, x: Tensor) -> Tensor:
        y = x.float()
        y = (y - y.mean(dim=-1, keepdim=True)) / torch.sqrt(y.var(dim=-1, keepdim=True, unbiased=True) + self.eps)
        return (y * self.weight.float() + self.bias.float()).to(x.dtype)


def layer_norm(kind: str, dim: int) -> nn.LayerNorm:
    """A LayerNorm of convention ``kind`` (one of LAYER_NORMS)."""
    return {"torch": nn.LayerNorm, "apptek": AppTekLayerNorm}[kind](dim)


def layer_norm_fp32(norm: nn.LayerNorm, x: Tensor) -> Tensor:
    """``norm`` applied to ``x`` in fp32, whatever the dtype of its parameters."""
    if isinstance(norm, AppTekLayerNorm):  # computes in fp32 already
        return norm(x.float())
    return F.layer_norm(x.float(), norm.normalized_shape, norm.weight.float(), norm.bias.float(), norm.eps)
