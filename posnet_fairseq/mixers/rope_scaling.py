"""RoPE scaling at inference: a trained RoPE model reads positions beyond its training lengths with changed
frequencies, chosen at generation time (``--model-overrides``).

Each method changes the rotation frequencies theta_i = base^(-2i/d),
i = 0 .. d/2 - 1, of ``rope.Rotary`` by a factor s >= 1 (the test length
over the training length):

* ``linear``, position interpolation (Chen et al. 2023, "Extending Context
  Window of Large Language Models via Positional Interpolation": the
  positions m -> m / s): theta_i / s. Every distance shrinks into the
  trained range, the near ones too;
* ``ntk``, NTK-aware scaling (bloc97, 2023, a forum post; YaRN's section
  3.1 writes it down): the base grows to base * s^(d / (d - 2)), so the
  lowest frequency is divided by s exactly and the highest is kept: near
  distances stay as trained, far ones are interpolated;
* ``yarn`` (Peng et al., ICLR 2024, "YaRN: Efficient Context Window
  Extension of Large Language Models", section 3): "NTK-by-parts" plus an
  attention temperature. With the training length L, pair i turns
  r_i = L theta_i / (2 pi) times over L; pairs with r_i > beta (beta = 32)
  keep theta_i, pairs with r_i < alpha (alpha = 1) take theta_i / s, and in
  between the ramp gamma(r) = (r - alpha) / (beta - alpha) blends them:
  theta_i' = (1 - gamma(r_i)) theta_i / s + gamma(r_i) theta_i. The logits
  are divided by t with sqrt(1/t) = 0.1 ln(s) + 1: queries and keys are both
  multiplied by 0.1 ln(s) + 1.

The factor is fixed for a run (the same for every sentence and both
sides), or, with ``--rope-scaling-factor auto``, chosen per sentence from
its source length n (tokens, EOS included) and the training length L
(``--rope-scaling-train-length``)::

    s = max(1, n / L)

for both sides of that sentence: the decoder reads n from the encoder output
(``forward_context.py``). Per sentence, not per batch, so that a sentence is
translated the same alone or batched; and a sentence's factor does not
change while it is decoded, so a cached key keeps its rotation and
incremental decoding stays exact. The methods apply to the ``rope`` mixer;
xPos has its own decay.
"""
import math
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import Tensor

from .. import flags

AUTO = "auto"


def _factor(value) -> Union[float, str]:
    """--rope-scaling-factor: a number, or ``auto``."""
    if value == AUTO:
        return AUTO
    try:
        return float(value)
    except ValueError:
        raise ValueError("must be a number or auto") from None


FLAGS = flags.declare(
    "RoPE scaling at inference", "position-schemes",
    flags.Flag("--rope-scaling", "none", "rope: how a trained RoPE model reads positions beyond its training "
               "lengths: linear position interpolation, NTK-aware base, YaRN (at generation: --model-overrides)",
               choices=("none", "linear", "ntk", "yarn")),
    flags.Flag("--rope-scaling-factor", 1.0, "rope: the scaling factor s (test length / training length), or auto: "
               "per sentence, max(1, source length / --rope-scaling-train-length)", type=_factor, metavar="S",
               check=lambda s: None if s == AUTO or (math.isfinite(s) and s >= 1) else "must be >= 1 or auto"),
    flags.Flag("--rope-scaling-train-length", None, "rope: the training length L of --rope-scaling yarn (its ramp "
               "counts the turns of each frequency over L)", type=int, metavar="L", check=flags.positive_integer,
               default_doc="none (needed by yarn)"),
    flags.Flag("--rope-scaling-yarn-alpha", 1.0, "rope: YaRN's alpha: pairs turning fewer than alpha times over L "
               "are interpolated", type=float, metavar="A", check=flags.positive_number),
    flags.Flag("--rope-scaling-yarn-beta", 32.0, "rope: YaRN's beta: pairs turning more than beta times over L "
               "are kept", type=float, metavar="B", check=flags.positive_number),
)


def refuse_without_rope(opts, mixers):
    """Checks the scaling flags ``opts`` (this module's FLAGS) of a model whose mixers are ``mixers`` (every
    site's and layer's names): as a RoPE model checks them, and refused (ValueError naming the flag) where no
    ``rope`` mixer would use them. Without the refusal a Transformer given ``--model-overrides "{'rope_scaling':
    'yarn'}"`` decodes as without it, and says nothing."""
    scaling = RopeScaling.from_options(opts)
    if scaling.method != "none" and "rope" not in mixers:
        raise ValueError(f"--rope-scaling {scaling.method}: the model has no rope mixer (its mixers: "
                         f"{', '.join(sorted(set(mixers)))}), so nothing would change; RoPE scaling is for a model "
                         "trained with --encoder-self-mixer or --decoder-self-mixer rope")


@dataclass(frozen=True)
class RopeScaling:
    """One method and its factor; :meth:`frequencies` and :attr:`magnitude` are what ``Rotary`` uses."""

    method: str = "none"
    factor: Union[float, str] = 1.0  # or AUTO: per sentence, from the source lengths
    train_length: Optional[int] = None
    alpha: float = 1.0
    beta: float = 32.0

    def __post_init__(self):
        if self.method == "none" and self.factor != 1.0:
            factor = self.factor if self.auto else format(self.factor, "g")
            raise ValueError(f"--rope-scaling-factor {factor}: has no effect with --rope-scaling none; "
                             "choose linear, ntk or yarn")
        if self.auto and self.train_length is None:
            raise ValueError("--rope-scaling-factor auto: needs --rope-scaling-train-length (the training length L)")
        if self.method == "yarn" and self.train_length is None:
            raise ValueError("--rope-scaling yarn: needs --rope-scaling-train-length (the training length L)")
        if self.method == "yarn" and not self.alpha < self.beta:
            raise ValueError(f"--rope-scaling-yarn-alpha {self.alpha:g}: must be below --rope-scaling-yarn-beta "
                             f"{self.beta:g}")

    @classmethod
    def from_options(cls, opts) -> "RopeScaling":
        return cls(opts.rope_scaling, opts.rope_scaling_factor, opts.rope_scaling_train_length,
                   opts.rope_scaling_yarn_alpha, opts.rope_scaling_yarn_beta)

    @property
    def auto(self) -> bool:
        return self.factor == AUTO

    def factors(self, source_lengths: Optional[Tensor]) -> Union[float, Tensor]:
        """s: the fixed factor, or with ``auto`` max(1, n / L) for the B source lengths n (B x 1, fp32)."""
        if not self.auto:
            return self.factor
        if source_lengths is None:
            raise ValueError("--rope-scaling-factor auto: the source lengths are unknown here (a RoPE mixer "
                             "outside posnet_transformer's encoder and decoder)")
        return (source_lengths.float() / self.train_length).clamp(min=1.0).unsqueeze(1)

    def frequencies(self, theta: Tensor, base: float, head_dim: int, s: Union[float, Tensor] = None) -> Tensor:
        """theta_i' of the method, given RoPE's theta_i = base^(-2i/d) (fp32, d/2 values), for the factor s
        (default: the fixed one), a number or B x 1 (then B x d/2)."""
        s = self.factor if s is None else s
        if self.method == "linear":
            return theta / s
        if self.method == "ntk":
            exponents = torch.arange(0, head_dim, 2, device=theta.device, dtype=torch.float32) / head_dim
            return (base * s ** (head_dim / (head_dim - 2))) ** -exponents  # (a tensor s: B x d/2)
        if self.method == "yarn":
            turns = self.train_length * theta / (2 * math.pi)  # r_i
            ramp = ((turns - self.alpha) / (self.beta - self.alpha)).clamp(0.0, 1.0)  # gamma(r_i)
            return (1 - ramp) * theta / s + ramp * theta
        return theta

    def magnitude(self, s: Union[float, Tensor] = None) -> Union[float, Tensor]:
        """The factor on queries and keys: YaRN's sqrt(1/t) = 0.1 ln(s) + 1; 1 for the other methods."""
        s = self.factor if s is None else s
        if self.method != "yarn":
            return 1.0
        return 0.1 * (s.log() if torch.is_tensor(s) else math.log(s)) + 1.0
