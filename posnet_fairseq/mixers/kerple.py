"""``kerple``: KERPLE, kernelized relative positional embedding, logarithmic variant (Chi et al., NeurIPS 2022).

The logit bias is a learned conditionally positive definite kernel of the
distance, one per head and layer; the logarithmic variant (section 4,
"KERPLE", the variant the paper finds best for length extrapolation)::

    softmax(q_m^T k_n / sqrt(d_h) + k(m, n)),
    k(m, n) = -r_1 log(1 + r_2 |m - n|),        r_1, r_2 > 0

Two parameters per head and layer. As in the authors' code
(chijames/KERPLE, ``ParallelKerpleLog``): r_1 ~ U(0, 2), r_2 ~ U(0, 1) at
initialisation, and both are kept at or above 0.01 (here: clamped where
used, so the stored values may fall lower but the kernel never sees them).
The paper's model is causal; the kernel is symmetric in m - n, so the
encoder uses the same form. Cross attention: no shared position axis.

KERPLE beside FIRE (Li et al., ICLR 2024, ``fire.py``): KERPLE's bias is a
function of the distance alone, so it is evaluated once per distance and
gathered (``DistanceBias``), with two scalars per head; FIRE's MLP takes
the distance normalised by the query position, so it is evaluated on
every query-key pair, with an MLP per layer.
"""
import torch
from torch import Tensor, nn

from .. import families
from .registry import register_mixer
from .content_attention import ContentAttention, DistanceBias, scheme_family

FLOOR = 0.01  # the authors' eps: r_1, r_2 >= 0.01

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "KERPLE (log)", "position-schemes", scheme_family(
    "kerple_transformer", "kerple", "KERPLE's log kernel in every self-attention, no position embeddings"))


class KerpleLogBias(DistanceBias):
    """-r_1 log(1 + r_2 |j - i|) per head (fp32)."""

    ELEMENTWISE = True

    def __init__(self, num_heads: int):
        super().__init__()
        self.strength = nn.Parameter(torch.rand(num_heads) * 2)  # r_1
        self.rate = nn.Parameter(torch.rand(num_heads))  # r_2

    def profile(self, distances: Tensor) -> Tensor:
        r1 = self.strength.float().clamp(min=FLOOR).unsqueeze(1)
        r2 = self.rate.float().clamp(min=FLOOR).unsqueeze(1)
        return -r1 * torch.log1p(r2 * distances.abs().float().unsqueeze(0))


@register_mixer("kerple", sites=("encoder_self", "decoder_self"))
class KerpleAttention(ContentAttention):
    """Content attention with KERPLE's logarithmic kernel bias (Chi et al. 2022, section 4)."""

    BIAS = KerpleLogBias
