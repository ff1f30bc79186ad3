"""``alibi_seq2seq``: ALiBi for encoder-decoder translation, with trainable slopes, per-head shifts and a
symmetric (or directional) encoder bias.

ALiBi (Press, Smith & Lewis, ICLR 2022, section 3; ``alibi.py``) adds the
fixed penalty -m_h (i - j) to the logit of query i and key j <= i. For
sequence-to-sequence models Marian (Junczys-Dowmunt et al.) makes the
slopes trainable and adds per-head biases, and uses the symmetric |i - j|
in the encoder; its authors report that the trainable version works better.
This mixer is that family, one flag per choice::

    b_h(i, j) = -m_h |i - j - s_h|                     (decoder: keys j <= i)
    b_h(i, j) = -m_h |i - j - s_h|                     (encoder, --alibi-seq2seq-encoder symmetric)
    b_h(i, j) = -m_h (i - j - s_h)  for j <= i,
                -m'_h (j - i + s_h) for j > i          (encoder, directional)

* **slopes** m_h: initialised to ALiBi's geometric slopes
  (``alibi.alibi_slopes``), trainable per head and layer
  (``--alibi-seq2seq-slopes trainable``, the default) or fixed (``fixed``:
  then with s_h = 0 and the symmetric encoder this is ``alibi``);
* **per-head shifts** s_h (``--alibi-seq2seq-head-shift``, learned,
  initialised 0): a constant added to every logit of a head would cancel in
  the softmax, so the per-head bias moves the distance at which the penalty
  is zero: a head can learn to look s_h tokens back. This is our reading of
  "per-head biases"; with s_h = 0 (the initialisation) it is ALiBi;
* **the encoder**: ``symmetric`` penalises |i - j| (Marian; the first ALiBi
  author's suggestion for bidirectional attention), so every encoder head is
  blind to direction; ``directional`` gives keys after the query slopes m'_h
  of their own (initialised to m_h, trainable with the slopes), so that the
  encoder can tell left from right once they differ.

The bias depends on the distance j - i only (``DistanceBias``: evaluated
once per distance). Fixed slopes are kept as Python floats, so a
half-precision model keeps them exact; trainable ones are fp32 parameters
(cast to fp32 where used). Cross attention: no shared position axis.
"""
import torch
from torch import Tensor, nn

from .. import families, flags
from .alibi import alibi_slopes, slope_column
from .registry import register_mixer
from .content_attention import ContentAttention, DistanceBias, scheme_family

FLAGS = flags.declare(
    "Seq2seq ALiBi", "position-schemes",
    flags.Flag("--alibi-seq2seq-slopes", "trainable", "alibi_seq2seq: the slopes m_h, initialised to ALiBi's "
               "geometric ones, are trained or fixed", choices=("trainable", "fixed")),
    flags.Flag("--alibi-seq2seq-head-shift", False, "alibi_seq2seq: a learned per-head shift s_h of the distance "
               "at which the penalty is zero (initialised 0)"),
    flags.Flag("--alibi-seq2seq-encoder", "symmetric", "alibi_seq2seq: the encoder penalises |i - j| "
               "(symmetric) or has slopes of its own for keys after the query (directional)",
               choices=("symmetric", "directional")),
)

# Its presets (families.py): the scheme in every self-attention, at every size, with its defaults.
families.declare(__name__, "Seq2seq ALiBi", "position-schemes", scheme_family(
    "alibi_seq2seq_transformer", "alibi_seq2seq",
    "seq2seq ALiBi (trainable slopes, symmetric encoder bias) in every self-attention, no position embeddings"))


class Seq2seqAlibiBias(DistanceBias):
    """-m_h |i - j - s_h| per head (fp32), or the directional form in the encoder (module docstring)."""

    def __init__(self, num_heads: int, trainable: bool = True, head_shift: bool = False,
                 directional: bool = False):
        super().__init__()
        slopes = alibi_slopes(num_heads)
        if trainable:
            self.slopes = nn.Parameter(torch.tensor(slopes))
            self.after_slopes = nn.Parameter(torch.tensor(slopes)) if directional else None
        else:  # Python floats, not a buffer: a half-precision model keeps them exact
            self.fixed_slopes = tuple(slopes)
            self.slopes = self.after_slopes = None
        self.shift = nn.Parameter(torch.zeros(num_heads)) if head_shift else None
        self.trainable, self.directional = trainable, directional

    def _slopes(self, after: bool, device) -> Tensor:
        """The slopes (H x 1, fp32) on ``device``."""
        if not self.trainable:
            return slope_column(self.fixed_slopes, device)
        return (self.after_slopes if after else self.slopes).float().unsqueeze(1)

    def profile(self, distances: Tensor) -> Tensor:
        offsets = -distances.float().unsqueeze(0)  # 1 x N: i - j, positive for keys before the query
        if self.shift is not None:
            offsets = offsets - self.shift.float().unsqueeze(1)
        before = -self._slopes(False, distances.device) * offsets.abs()
        if not self.directional:
            return before
        after = -self._slopes(True, distances.device) * offsets.abs()
        return torch.where(distances.unsqueeze(0) > 0, after, before)

    def extra_repr(self):
        return f"trainable={self.trainable}, head_shift={self.shift is not None}, directional={self.directional}"


@register_mixer("alibi_seq2seq", sites=("encoder_self", "decoder_self"), variants={
    "directional_shift": {"alibi_seq2seq_encoder": "directional", "alibi_seq2seq_head_shift": True},
    "fixed": {"alibi_seq2seq_slopes": "fixed"}})
class Seq2seqAlibiAttention(ContentAttention):
    """Content attention with ALiBi's penalties, trainable slopes and optional per-head shifts (Marian's seq2seq ALiBi)."""

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        directional = opts.alibi_seq2seq_encoder == "directional" and not ctx.site.causal
        if directional and opts.alibi_seq2seq_slopes == "fixed":
            raise ValueError("--alibi-seq2seq-encoder directional: its after-query slopes start equal to the "
                             "others and only training separates them; it needs --alibi-seq2seq-slopes trainable")
        bias = Seq2seqAlibiBias(ctx.num_heads, opts.alibi_seq2seq_slopes == "trainable",
                                opts.alibi_seq2seq_head_shift, directional)
        return cls(ctx.embed_dim, ctx.num_heads, ctx.dropout, ctx.site.causal, bias=bias)
