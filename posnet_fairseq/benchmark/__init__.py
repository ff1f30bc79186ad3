"""Speed and memory of every mechanism against the Transformer: the measuring code and its command lines.

Measuring (shared with ``posnet-compare``):

* :mod:`.training_step` - the one definition of a measured training step
  (forward, loss, backward, Adam): activation memory saved for backward, peak
  resident memory, wall and CPU seconds per step, FLOPs per target token; in
  this process or a fresh one
* :mod:`.decode_speed` - fairseq-generate at forced output lengths: sentences/s
  and CPU seconds, the architectures alternating within each round
* :mod:`.flops` - arithmetic per generated and per training token, counted
  from the shapes of every product the built model runs: each mechanism's
  ceiling against the Transformer

Command lines (``python -m posnet_fairseq.benchmark.<name>``; each measures the
Transformer in the same run and prints ratios against it):
:mod:`.decode_speed`, :mod:`.train_speed`, :mod:`.memory`.
"""

# One preset per mechanism family, without the size suffix (:func:`resolve`
# adds it): the Transformer first (the baseline), the -SA ceiling, then the
# families of the four papers, then the position schemes of content attention.
FAMILIES = (
    "transformer", "transformer_nosa", "rposnet_transformer", "aposnet_transformer", "shaw_transformer",
    "relattn_transformer", "glinearnet_transformer", "fouriernet_transformer", "lightconv_apptek_transformer",
    "hc_gaussian", "hc_gaussian_shx", "aan_plus_avg", "aan_plus_ner", "aan_plus_far", "aan_plus_wet", "ssru",
    "linear_attention", "tisa_transformer", "rope_transformer", "alibi_transformer", "t5bias_transformer",
    "kerple_transformer", "nope_transformer",
)
ALIASES = {"transformer": "posnet_transformer"}


def resolve(name, size):
    """The registered preset for ``name`` at ``size`` (``transformer`` stands for ``posnet_transformer``;
    presets whose base size has no suffix, such as ``hc_gaussian``, are found too)."""
    from fairseq.models import ARCH_MODEL_REGISTRY  # the presets are registered by importing posnet_fairseq

    prefix = ALIASES.get(name, name)
    candidates = [f"{prefix}_{size}"] + ([prefix] if size == "base" else [])
    if name in ARCH_MODEL_REGISTRY and name not in candidates:
        candidates.append(name)  # a full preset name, size included
    for arch in candidates:
        if arch in ARCH_MODEL_REGISTRY:
            return arch
    raise SystemExit(f"--archs {name}: no preset {' or '.join(candidates)} is registered")
