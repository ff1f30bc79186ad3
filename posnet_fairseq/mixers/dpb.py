"""``dpb``: a dynamic position bias, an MLP of the log-distance (Wang et al., ICLR 2022, CrossFormer).

The logit bias of every head is a learned function of the signed
key-query distance, taken on a log scale so that far distances share
nearly one input and an MLP trained on short sentences meets no input far
outside its training range::

    softmax(q_i^T k_j / sqrt(d_h) + B_h(i - j)),
    B(d) = MLP( sign(d) log(1 + |d|) ),   d = i - j (positive for keys before the query)

The MLP: Linear(1, W), then D - 1 times [SiLU, Linear(W, W)], then SiLU,
Linear(W, H): one output per head (``--dpb-width`` W = 32, ``--dpb-depth``
D = 2). CrossFormer introduced the MLP bias for vision (two dimensions, no
log); the log-distance input and sharing one MLP by all layers of a stack
follow x-transformers' ``DynamicPositionBias(log_distance=True)``, which
its author calls the safest option for extrapolating bidirectional
attention. The decoder sees d >= 0 only (causal mask); the encoder the
signed d, so it knows keys before the query from keys after it.

The bias depends on the distance only (``DistanceBias``: the MLP runs once
per distinct distance, 2 max(T, S) + 1 inputs per call, not per pair). One
MLP per encoder (and one per decoder), shared by its layers like T5's table.
Cross attention: no shared position axis.
"""
import torch
from torch import Tensor, nn

from .. import families, flags
from .attention import autocast_off
from .registry import register_mixer
from .content_attention import ContentAttention, DistanceBias, scheme_family

FLAGS = flags.declare(
    "Dynamic position bias (log-distance MLP)", "position-schemes",
    flags.Flag("--dpb-width", 32, "dpb: hidden units of the MLP of the log-distance", type=int, metavar="W",
               check=flags.positive_integer),
    flags.Flag("--dpb-depth", 2, "dpb: hidden layers of the MLP", type=int, metavar="D",
               check=flags.positive_integer),
)

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "Dynamic position bias", "position-schemes", scheme_family(
    "dpb_transformer", "dpb", "a log-distance MLP bias in every self-attention, no position embeddings"))


def log_distance(distances: Tensor) -> Tensor:
    """sign(d) log(1 + |d|) for d = i - j, given the distances j - i (fp32)."""
    d = -distances.float()
    return torch.sign(d) * torch.log1p(d.abs())


class DynamicPositionBias(DistanceBias):
    """MLP(sign(d) log(1 + |d|)) for every head (fp32), shared by the layers of one stack."""

    def __init__(self, num_heads: int, width: int = 32, depth: int = 2):
        super().__init__()
        layers = [nn.Linear(1, width)]
        for _ in range(depth - 1):
            layers += [nn.SiLU(), nn.Linear(width, width)]
        layers += [nn.SiLU(), nn.Linear(width, num_heads)]
        self.mlp = nn.Sequential(*layers)

    def profile(self, distances: Tensor) -> Tensor:
        x = log_distance(distances).unsqueeze(1)  # N x 1
        # The MLP in fp32 whatever the model's dtype, autocast (--amp) included (the
        # table is small: one row per distance).
        with autocast_off(x):
            for layer in self.mlp:
                x = (torch.nn.functional.linear(x, layer.weight.float(), layer.bias.float())
                     if isinstance(layer, nn.Linear) else layer(x))
        return x.t()  # H x N


@register_mixer("dpb", sites=("encoder_self", "decoder_self"), variants={"depth1": {"dpb_depth": 1}})
class DynamicPositionBiasAttention(ContentAttention):
    """Content attention with an MLP bias of the signed log-distance, shared by the layers (dynamic position bias)."""

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        bias = ctx.shared_module(f"dpb_{ctx.site.name}", lambda: DynamicPositionBias(
            ctx.num_heads, opts.dpb_width, opts.dpb_depth))
        return cls(ctx.embed_dim, ctx.num_heads, ctx.dropout, ctx.site.causal, bias=bias, shared_bias=True)
