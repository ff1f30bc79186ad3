"""The beam-shared cross attention's decoding step: fairseq's MultiheadAttention, whose incremental step in beam
mode (``set_beam_size``, put on by ``models/beam_shared.py``) is the plugin's own once the model is prepared for
generation (``make_generation_fast_``, as fairseq-generate prepares it; not with ``--no-beamable-mm``).

Scaled dot-product attention (Vaswani et al., 2017, Eq. 1) per head, softmax(Q K^T / sqrt(d_k) + M) V with M 0 at a
source token and -inf at a pad, where the ``beam`` hypotheses of a sentence attend to the sentence's keys and values.
fairseq's beamable step reads one key and value row per sentence too, but lays the beam out with two einsums whose
permutes copy their operands and results, converts its cached float padding mask to bool and masks into a new tensor
at every step. Here:

* a search's first step projects the source once per sentence (fairseq's ``k_proj`` / ``v_proj`` on the first
  hypothesis of each) and caches, for B sentences of S tokens, the keys transposed (B x H x D_h x S), the values
  (B x H x S x D_h) and M (B x H x 1 x S), each contiguous: the batched products below read them as B*H matrices
  with no copy, the keys in the order in which the score product reads them. The first hypothesis's rows of the
  encoder output are gathered into one contiguous S x B x C tensor once for every layer (kept in the search's
  incremental state under :data:`SOURCE`): a projection of the strided rows would gather them itself, twice per
  layer (issue 48, point 4: a search's once-only work weighs most on short sentences);
* every step projects the query (fairseq's ``q_proj``), lays its rows out as one B*H x beam x D_h batch (one
  copy), and runs one ``torch.baddbmm`` (M plus the scaled scores), the softmax and one ``torch.bmm`` (the weighted
  values), then fairseq's ``out_proj``. (``torch.nn.functional.scaled_dot_product_attention`` would fuse the three
  but returns no attention weights, which the decoder's alignment layer asks for at every step.)

The cache lives in the module's own incremental-state buffer, under names fairseq's step does not read, every
entry with one row per sentence, so that fairseq's ``reorder_incremental_state`` (in beam mode) leaves it as it is
for a reorder within sentences and keeps the rows of the sentences still searched when others finish. The outputs
are fairseq's per-hypothesis path's up to float rounding (the scale applied to the scores, not the queries, and
the products summed in another order). Every other call (teacher forcing, beam 1, an ``attn_mask``, dropout at
inference, ``before_softmax``) runs fairseq's forward itself.
"""
import torch
from fairseq.modules import MultiheadAttention

# The step's entries in the module's incremental-state buffer (B rows each): keys (B x H x D_h x S), values
# (B x H x S x D_h), M (B x H x 1 x S).
KEYS, VALUES, MASK = "beam_keys", "beam_values", "beam_mask"
# The search's incremental-state entry shared by every layer: the encoder output its first step was given and
# that output's rows of one hypothesis per sentence, contiguous (S x B x C). A plain key beside fairseq's
# per-module ones: fairseq's reorders walk modules and never read it, only a search's first step does, and it is
# dropped with the search's incremental state (a new search, a new dict).
SOURCE = "beam_cross_attention.source"


class BeamCrossAttention(MultiheadAttention):
    """fairseq's MultiheadAttention with the beam-shared incremental step of the module doc."""

    @classmethod
    def adopt(cls, attention):
        """``attention`` (a MultiheadAttention at the cross site, built by fairseq or by a mixer) made an instance
        of this class, which adds no parameter, buffer or attribute: the module keeps its state-dict names and
        every path but the step. A module with fairseq's ``add_bias_kv`` / ``add_zero_attn`` (extra key rows the
        step does not make) stays as it is."""
        if attention.bias_k is None and not attention.add_zero_attn:
            attention.__class__ = cls
        return attention

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=True,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if (incremental_state is None or not static_kv or self.beam_size == 1 or attn_mask is not None
                or before_softmax or self.training or self.dropout_module.apply_during_inference):
            return super().forward(query, key, value, key_padding_mask, incremental_state, need_weights, static_kv,
                                   attn_mask, before_softmax, need_head_weights)
        state = self._get_input_buffer(incremental_state)
        if KEYS not in state:
            sentences = query.size(1) // self.beam_size
            state = self._cache(sentence_rows(incremental_state, key, sentences), key_padding_mask, sentences)
            self._set_input_buffer(incremental_state, state)
        return self._step(query, state, need_weights or need_head_weights, need_head_weights)

    def _cache(self, key, key_padding_mask, sentences):
        """The buffer of a search's first step: keys, values and M of each sentence (the module doc); ``key`` is
        the encoder output's rows of one hypothesis per sentence (S x B x C, :func:`sentence_rows`) and
        ``key_padding_mask`` the padding of one row per hypothesis (beam search's expansion, each sentence's rows
        together) or per sentence."""
        source = key.size(0)
        if key_padding_mask is not None and key_padding_mask.size(0) != sentences:
            key_padding_mask = key_padding_mask.view(sentences, -1, source)[:, 0]

        heads, width = self.num_heads, self.head_dim
        # S x B x C -> B x H x D_h x S: the transpose of the S x (B C) matrix, which torch copies in blocks, where
        # the 4-d permute's copy reads the projection with a stride of B C numbers
        keys = self.k_proj(key).reshape(source, -1).t().contiguous().view(sentences, heads, width, source)
        values = self.v_proj(key).view(source, sentences, heads, width).permute(1, 2, 0, 3).contiguous()
        mask = values.new_zeros(sentences, heads, 1, source)
        if key_padding_mask is not None:
            mask.masked_fill_(key_padding_mask.view(sentences, 1, 1, source).to(torch.bool), float("-inf"))
        return {KEYS: keys, VALUES: values, MASK: mask}

    def _step(self, query, state, need_weights, need_head_weights):
        """Attention of the T x N x C ``query`` (N = B sentences x beam) over the cached sentences; returns the
        output and, with ``need_weights``, fairseq's weights: per head (H x N x T x S) or their mean (N x T x S)."""
        keys, values, mask = state[KEYS], state[VALUES], state[MASK]
        sentences, heads, width, source = keys.shape
        steps, rows, channels = query.size()
        beam = rows // sentences
        # T x B x beam x H x D_h -> (B H) x (beam T) x D_h: a sentence's hypotheses as the rows of one product
        q = (self.q_proj(query).view(steps, sentences, beam, heads, width).permute(1, 3, 2, 0, 4)
             .reshape(sentences * heads, beam * steps, width))
        scores = torch.baddbmm(mask.view(sentences * heads, 1, source), q, keys.view(sentences * heads, width, source),
                               alpha=self.scaling)
        probs = torch.softmax(scores, -1, dtype=torch.float32)  # in fp32, as fairseq's utils.softmax
        mixed = torch.bmm(probs.to(values.dtype), values.view(sentences * heads, source, width))
        out = self.out_proj(mixed.view(sentences, heads, beam, steps, width).permute(3, 0, 2, 1, 4)
                            .reshape(steps, rows, channels))
        if not need_weights:
            return out, None
        probs = probs.view(sentences, heads, beam, steps, source)
        if need_head_weights:
            return out, probs.transpose(0, 1).reshape(heads, rows, steps, source)
        return out, probs.mean(1).view(rows, steps, source)


def sentence_rows(incremental_state, encoder_out, sentences):
    """The S x B x C rows of ``encoder_out`` (S x rows x C, one row per hypothesis, each sentence's rows together,
    or one per sentence) of the first hypothesis of each of the B ``sentences``, contiguous: gathered at a search's
    first step once for every layer (they are given the same encoder output) and kept under :data:`SOURCE`."""
    held = incremental_state.get(SOURCE)
    if held is None or held["encoder_out"] is not encoder_out:
        rows = encoder_out
        if encoder_out.size(1) != sentences:  # the hypotheses of a sentence have the same row: read the first
            rows = encoder_out.view(encoder_out.size(0), sentences, -1, encoder_out.size(2))[:, :, 0].contiguous()
        held = incremental_state[SOURCE] = {"encoder_out": encoder_out, "rows": rows}
    return held["rows"]
