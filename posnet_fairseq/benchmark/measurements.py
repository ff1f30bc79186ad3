"""The records the benchmarks return, and the one place their statistics are computed.

A figure is measured in rounds (the models alternating within each, so that
the slow phases of a shared machine hit every model alike) and reported as
its median over the rounds. A model is compared with the baseline measured in
the same run: the speed ratio (model / baseline, above 1 = faster), the
ceiling (the baseline's FLOPs per token over the model's,
:func:`posnet_fairseq.benchmark.flops.ceiling`: the ratio the arithmetic
allows) and the share of the ceiling the measured ratio reaches. The
benchmarks' command lines and ``posnet-compare`` format these records; none
computes them again.
"""
import statistics
from dataclasses import dataclass
from typing import List, Optional

from .flops import ceiling as flops_ceiling


def ratio(value, base):
    """value / base, or None when either is missing (or the base is 0)."""
    return value / base if value is not None and base else None


@dataclass(frozen=True)
class Against:
    """A model's speed against the baseline's, and what its arithmetic allows."""

    speed_ratio: Optional[float]
    ceiling: float
    share: Optional[float]  # speed_ratio / ceiling


def against(speed_ratio, flops, base_flops) -> Optional[Against]:
    """The comparison of a model doing ``flops`` per token with a baseline doing ``base_flops``; None without
    both counts."""
    if not flops or not base_flops:
        return None
    ceiling = flops_ceiling(flops, base_flops)
    return Against(speed_ratio, ceiling, ratio(speed_ratio, ceiling))


@dataclass
class DecodeTiming:
    """fairseq-generate at one forced output length, one :func:`~.decode_speed.generate_timed` result per
    round: {"rate": sentences/s, "cpu_s": CPU seconds generating, "tokens_per_hyp"} (and "gpu_s" on a GPU)."""

    rounds: List[dict]

    def median(self, key):
        return statistics.median(r[key] for r in self.rounds)

    @property
    def rate(self):
        return self.median("rate")

    @property
    def cpu_s(self):
        return self.median("cpu_s")

    @property
    def tokens_per_hyp(self):
        return self.rounds[0]["tokens_per_hyp"]

    def record(self):
        """As ``posnet-compare`` stores it (cost.json)."""
        return {"rounds": self.rounds, "rate": self.rate, "cpu_s": self.cpu_s, "tokens_per_hyp": self.tokens_per_hyp}


@dataclass
class StepTiming:
    """One training step of a model, one :func:`~.training_step.measure` result per round."""

    rounds: List[dict]

    def median(self, key):
        return statistics.median(r[key] for r in self.rounds)

    def record(self):
        """The first round's figures (the counts: tokens, parameters, FLOPs, saved bytes) with the medians of
        the measured ones, and the throughput they give, as ``posnet-compare`` stores it (cost.json)."""
        result = dict(self.rounds[0])
        for key in ("step_kb", "step_s", "step_cpu_s"):
            result[key] = self.median(key)
        result["tokens_per_s"] = result["tokens"] / result["step_s"]
        result["tokens_per_cpu_s"] = result["tokens"] / result["step_cpu_s"]
        return result
