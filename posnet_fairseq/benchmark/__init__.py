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
* :mod:`.op_counts` - operators per incremental decoding step and per
  training step (CUDA kernels on a GPU, leaf aten operators on the CPU), from
  torch.profiler: the per-step overhead a base model's GPU step is bound by
* :mod:`.host_time` - wall time per training and decoding step at toy shapes
  on one CPU thread: the proxy of a launch-bound GPU step's CPU issue time,
  printed by :mod:`.op_counts`
* :mod:`.decoding_step` - one incremental beam-search decoding step as
  fairseq's ``SequenceGenerator`` runs it (counted and timed)

Command lines (``python -m posnet_fairseq.benchmark.<name>``; each measures the
Transformer in the same run and prints ratios against it):
:mod:`.decode_speed`, :mod:`.train_speed`, :mod:`.memory`, :mod:`.op_counts`.
"""

from ..families import benchmark_families

# One preset per mechanism family, without the size suffix (:func:`resolve`
# adds it), as the mechanisms declare them (families.py): the Transformer
# first (the baseline), the -SA ceiling, then one family per mechanism.
FAMILIES = tuple(family.short or family.prefix for family in benchmark_families())
ALIASES = {family.short: family.prefix for family in benchmark_families() if family.short}


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
