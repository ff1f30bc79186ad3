"""``t5_bias``: T5's relative position bias (Raffel et al., JMLR 2020, "Exploring the Limits of Transfer Learning").

Section 2.1 (no numbered equation): "each 'embedding' is simply a scalar that
is added to the corresponding logit used for computing the attention
weights"; one learned scalar per head and per distance *bucket*, the table
shared by all layers of the encoder (or decoder); 32 buckets "with ranges
that increase in size logarithmically up to an offset of 128 beyond which we
assign all relative positions to the same embedding". The bucketing, as the
authors' code (mesh_tensorflow ``_relative_position_bucket``) defines it,
for n = i - j (query i, key j) and B buckets, max distance M:

* bidirectional (encoder): B/2 buckets for n >= 0, B/2 for keys after the
  query (n < 0, offset by B/2); causal (decoder): all B buckets for n >= 0
  (keys after the query are masked);
* within a half, with E = (buckets of the half) / 2: the distance |n| itself
  for |n| < E; beyond, ``E + floor(log(|n| / E) / log(M / E) * (half - E))``,
  capped at the half's last bucket, so distances >= M share that bucket.

The logarithm is taken in float32, as the reference implementations do, so
that the bucket boundaries are theirs to the last distance.

The bias is added to the scaled logits (T5 folds the 1/sqrt(d_h) scaling into
its initialisation; this model keeps fairseq's scaled dot product). T5 uses
no position bias in cross attention, and neither does this mixer (self sites
only). Parameters: B x H per encoder/decoder, initialised N(0, D^-1/2) as
the Hugging Face T5 implementation initialises its table.
"""
import math

import torch
from torch import Tensor, nn

from .. import families, flags
from .registry import register_mixer
from .content_attention import ContentAttention, DistanceBias, scheme_family

FLAGS = flags.declare(
    "T5 relative position bias", "position-schemes",
    flags.Flag("--t5-bias-buckets", 32, "t5_bias: distance buckets per encoder/decoder (bidirectional: half for "
               "each direction)", type=int, metavar="B",
               check=lambda b: None if b >= 4 and b % 2 == 0 else "must be an even integer >= 4"),
    flags.Flag("--t5-bias-max-distance", 128, "t5_bias: distances from here on share the last bucket",
               type=int, metavar="M", check=flags.positive_integer),
)

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "T5 relative bias", "position-schemes", scheme_family(
    "t5bias_transformer", "t5_bias", "T5's bucketed bias in every self-attention, no position embeddings",
    ctranslate2=families.CONVERTS))  # through benchmark/ctranslate2_relative.py


def t5_buckets(distances: Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """The bucket of every key-query distance j - i (long tensor of any shape)."""
    n = -distances  # i - j: positive for keys before the query
    if bidirectional:
        half = num_buckets // 2
        offset = (n < 0).long() * half
        n = n.abs()
    else:
        half = num_buckets
        offset = torch.zeros_like(n)
        n = n.clamp(min=0)
    exact = half // 2
    # log(0) is never used (n < exact there) but would be -inf: clamp first.
    scaled = torch.log(n.clamp(min=1).float() / exact) / math.log(max_distance / exact) * (half - exact)
    logarithmic = (exact + scaled.long()).clamp(max=half - 1)
    return offset + torch.where(n < exact, n, logarithmic)


class T5Bias(DistanceBias):
    """One learned scalar per head and distance bucket (B x H table)."""

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int, bidirectional: bool, embed_dim: int):
        super().__init__()
        if max_distance <= num_buckets // 2:
            raise ValueError(f"--t5-bias-max-distance {max_distance}: must exceed --t5-bias-buckets / 2 "
                             f"({num_buckets // 2}), where the log-spaced buckets begin")
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.table = nn.Embedding(num_buckets, num_heads)
        nn.init.normal_(self.table.weight, std=embed_dim ** -0.5)

    def profile(self, distances: Tensor) -> Tensor:
        buckets = t5_buckets(distances, self.bidirectional, self.num_buckets, self.max_distance)
        return self.table.weight.float()[buckets].t()

    def extra_repr(self):
        return f"buckets={self.num_buckets}, max_distance={self.max_distance}, bidirectional={self.bidirectional}"


@register_mixer("t5_bias", sites=("encoder_self", "decoder_self"),
                variants={"short": {"t5_bias_buckets": 8, "t5_bias_max_distance": 6}})
class T5BiasAttention(ContentAttention):
    """Content attention with T5's bucketed relative position bias, shared across layers (Raffel et al. 2.1)."""

    @classmethod
    def build(cls, ctx):
        opts, causal = ctx.options(FLAGS), ctx.site.causal
        bias = ctx.shared_module(f"t5_bias_{ctx.site.name}", lambda: T5Bias(
            ctx.num_heads, opts.t5_bias_buckets, opts.t5_bias_max_distance, not causal, ctx.embed_dim))
        return cls.at_site(ctx, bias=bias, shared_bias=True)
