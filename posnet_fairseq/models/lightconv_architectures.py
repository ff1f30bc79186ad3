"""Presets of AppTek's light convolution, the PosNet paper's "LightConv" baseline (Tables 2 and 5).

Table 5 goes from the light convolution to rPosNet one step at a time; each
step is one preset family (``_tiny``, ``_small``, ``_base``, ``_big``):

* ``lightconv_apptek_transformer_*``: ``lightconv_apptek`` in encoder and
  decoder self-attention, window +-16, no gating ("Light Convolution");
* ``lightconv_apptek_gated_transformer_*``: the same with the PosNet GeLU
  gating at both self-attention sites ("+ GeLU gating");
* ``lightconv_apptek_global_transformer_*``: gated, and with
  ``--lightconv-global-context`` ("+ global context").

Cross attention is fairseq's MultiheadAttention. K = 16 at every size, as in
AppTek's configurations. fairseq's sinusoidal position embeddings are kept
(the notes do not say whether AppTek's LightConv models add them).
"""
from .architectures import register_sizes


def _lightconv_mechanism(gated, global_context):
    def mechanism(args, size):
        args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "lightconv_apptek")
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "lightconv_apptek")
        args.lightconv_max_relative = getattr(args, "lightconv_max_relative", 16)
        if gated:
            args.encoder_self_gating = getattr(args, "encoder_self_gating", "on")
            args.decoder_self_gating = getattr(args, "decoder_self_gating", "on")
        if global_context:
            args.lightconv_global_context = getattr(args, "lightconv_global_context", True)

    return mechanism


for _prefix, _gated, _global in (("lightconv_apptek_transformer", False, False),
                                 ("lightconv_apptek_gated_transformer", True, False),
                                 ("lightconv_apptek_global_transformer", True, True)):
    register_sizes(_prefix, _lightconv_mechanism(_gated, _global))
