"""``fire``: functional interpolation for relative positions (Li et al., ICLR 2024, "Functional Interpolation
for Relative Positions Improves Long Context Transformers").

The logit bias of head h is a learned function of the distance, normalised
by the query's position (section 3, "FIRE"; the final form, with the log
transform and the threshold)::

    softmax(q_i^T k_j / sqrt(d_h) + b(i, j)),
    b(i, j) = f_theta( psi(i - j) / psi(max(L, i)) ),    psi(x) = log(c x + 1)

* **progressive interpolation**: i - j is divided by the query position i,
  so that for every query the distances it sees lie in [0, 1], whatever the
  sequence length; a model evaluated beyond its training lengths meets no
  input outside the range it was trained on;
* **psi**, the log transform with a learned c > 0 (init 0.1), amplifies the
  differences between nearby positions, which the division compresses;
* **the threshold L** (learned, init 512): a query at a position below L is
  normalised by psi(L), so that short contexts are not stretched to [0, 1];
* **f_theta**: an MLP 1 -> 32 -> H with a ReLU (the paper's width 32), one
  output per head.

c and L are one scalar each per layer, as in the authors' released module;
the stored values may turn negative in training, so c and L enter as |c|
and |L| (the authors take the absolute value too). L is stored as a
multiplier of the initial threshold (so its gradient step is relative to
it, as in their module).

**The encoder** (bidirectional self-attention; the paper's model is causal)
uses the same rule with the direction kept and the normaliser being the
longest distance the query sees::

    b(i, j) = f_theta( sign(i - j) psi(|i - j|) / psi(max(L, R_i)) ),   R_i = max(i, n - 1 - i)

for a sentence of n tokens. Under the causal mask (decoder) R_i = i and the
sign is never negative, so this is the paper's formula; in the encoder the
signed input lets the MLP tell keys before the query from keys after it
(|i - j| would make the encoder's bias symmetric, and a Transformer without
position embeddings and a symmetric bias cannot tell "a b" from "b a" at
equal distances). The bias depends on the query position, not on the
distance alone, so it is evaluated for every query-key pair (not a
:class:`DistanceBias`): B x T x S inputs of the MLP, each 32 wide.
Cross attention: no shared position axis (see ``content_attention.py``).
"""
import torch
from torch import Tensor, nn

from .. import families, flags
from .attention import autocast_off
from .registry import register_mixer
from .content_attention import ContentAttention, scheme_family

FLAGS = flags.declare(
    "FIRE (functional interpolation for relative positions)", "position-schemes",
    flags.Flag("--fire-mlp-width", 32, "fire: hidden units of the MLP f_theta (Li et al. 2024: 32)",
               type=int, metavar="W", check=flags.positive_integer),
    flags.Flag("--fire-init-c", 0.1, "fire: initial c of the log transform psi(x) = log(c x + 1)",
               type=float, metavar="C", check=flags.positive_number),
    flags.Flag("--fire-init-threshold", 512.0, "fire: initial threshold L: queries before position L are "
               "normalised by psi(L)", type=float, metavar="L", check=flags.positive_number),
)

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "FIRE", "position-schemes", scheme_family(
    "fire_transformer", "fire", "FIRE in every self-attention, no position embeddings"))


class FireBias(nn.Module):
    """f_theta(sign(i - j) psi(|i - j|) / psi(max(L, R_i))) for every head (fp32), one module per layer."""

    # Its MLP runs in fp32 from its weights (forward): int8 decoding (models/int8.py) leaves it in fp32.
    FP32_LINEARS = ("mlp",)

    def __init__(self, num_heads: int, width: int = 32, init_c: float = 0.1, init_threshold: float = 512.0,
                 causal: bool = True):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, num_heads))
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))  # L = |threshold_scale| * init_threshold
        self.init_threshold, self.causal = float(init_threshold), causal

    def psi(self, x: Tensor) -> Tensor:
        return torch.log1p(self.c.float().abs() * x)

    def threshold(self) -> Tensor:
        return self.threshold_scale.float().abs() * self.init_threshold

    def normalised_distances(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        """The MLP's input, B x T x S, from 0-based query and key positions (B x T, B x S)."""
        query = query_positions.float()
        offsets = query.unsqueeze(2) - key_positions.float().unsqueeze(1)  # i - j
        reach = query
        if not self.causal:  # the key furthest from the query: the sentence's first or last (n - 1) token
            last = key_positions.float().max(dim=-1, keepdim=True).values
            reach = torch.maximum(query, last - query)
        normaliser = self.psi(torch.maximum(reach, self.threshold()))
        return torch.sign(offsets) * self.psi(offsets.abs()) / normaliser.unsqueeze(2)

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        x = self.normalised_distances(query_positions, key_positions)
        weight1, bias1 = self.mlp[0].weight.float(), self.mlp[0].bias.float()
        weight2, bias2 = self.mlp[2].weight.float(), self.mlp[2].bias.float()
        # The MLP in fp32 whatever the model's dtype, autocast (--amp) included: its
        # input resolves distances of 1 in thousands.
        with autocast_off(x):
            hidden = torch.relu(x.unsqueeze(-1) * weight1[:, 0] + bias1)  # B x T x S x W
            return (hidden @ weight2.t() + bias2).permute(0, 3, 1, 2)  # B x H x T x S

    def extra_repr(self):
        return f"causal={self.causal}, init_threshold={self.init_threshold:g}"


@register_mixer("fire", sites=("encoder_self", "decoder_self"),
                variants={"short_threshold": {"fire_init_threshold": 3.0}})
class FireAttention(ContentAttention):
    """Content attention with FIRE's learned bias of the progressively interpolated distance (Li et al. 2024)."""

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        bias = FireBias(ctx.num_heads, opts.fire_mlp_width, opts.fire_init_c, opts.fire_init_threshold,
                        ctx.site.causal)
        return cls(ctx.embed_dim, ctx.num_heads, ctx.dropout, ctx.site.causal, bias=bias)
