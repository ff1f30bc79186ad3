"""The figures of a ``posnet-compare`` run as typed records, for the report, and a training's outcome
(:class:`TrainOutcome`, kept by its step train/MODEL).

``quality.json`` and ``cost.json`` keep their JSON form (scripts and the
saved ``docs/compare`` run read it); :meth:`Quality.read` and :meth:`Cost.read`
turn it into these records, so that :mod:`posnet_fairseq.compare.report`
reads named fields, not string keys.
"""
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

from .concatenated import bucket_label, bucket_name


@dataclass(frozen=True)
class Score:
    """One metric of one model: sacreBLEU's score, the bootstrap mean and 95% half-width, and the p-value
    against the first model (two-sided) with its direction where it is at most 0.05."""

    score: float
    mean: float
    ci: float
    p: Optional[float] = None
    direction: Optional[str] = None

    @classmethod
    def read(cls, entry):
        return cls(entry["score"], entry["mean"], entry["ci"], entry.get("p"), entry.get("direction"))


@dataclass(frozen=True)
class System:
    bleu: Score
    chrf: Score
    skipped: int  # test sentences fairseq-generate skipped (longer than the model takes)
    limits: Tuple[int, int]  # (source, target) positions


@dataclass(frozen=True)
class BucketScore:
    score: Optional[float] = None
    ci: Optional[float] = None
    length_ratio: Optional[float] = None  # hypothesis / reference length
    beyond: Optional[int] = None  # the model takes this many positions, fewer than every sentence of the bucket


@dataclass(frozen=True)
class Bucket:
    lo: int
    hi: int
    sentences: int
    beyond_training: bool
    too_small: bool
    scores: Dict[str, BucketScore]
    concatenated: Optional[int] = None  # K: the bucket holds examples of K test pairs joined (--concat-test)

    @property
    def name(self):
        return bucket_name(self.lo, self.hi, self.concatenated)

    @property
    def label(self):
        return bucket_label(self.lo, self.hi, self.concatenated)


@dataclass(frozen=True)
class Quality:
    systems: Dict[str, System]
    buckets: List[Bucket]
    signatures: Dict[str, str]
    train_limit: int
    samples: int
    length_unit: str
    min_bucket_sentences: Optional[int]
    failed: Dict[str, str] = field(default_factory=dict)  # {model: why its translation failed}
    concatenated: Optional[dict] = None  # --concat-test: what results.md says of the joined examples
    # {arch: {"in range"|"beyond"|"joined": posnet_fairseq.compare.verdict.Test's JSON or None}}; None: not judged
    verdict: Optional[dict] = None
    kept: Optional[dict] = None  # {arch: {bucket label: {"kept", "against"}}}: posnet_fairseq.compare.verdict.kept
    test_groups: Optional[dict] = None  # --test-groups: posnet_fairseq.compare.test_groups.summary

    @classmethod
    def read(cls, q):
        systems = {arch: System(Score.read(s["bleu"]), Score.read(s["chrf"]), s["skipped"], tuple(s["limits"]))
                   for arch, s in q["systems"].items()}
        buckets = [Bucket(b["lo"], b["hi"], b["sentences"], b["beyond_training"], b.get("too_small", False),
                          {arch: BucketScore(e.get("score"), e.get("ci"), e.get("length_ratio"), e.get("beyond"))
                           for arch, e in b["scores"].items()}, b.get("concatenated")) for b in q["buckets"]]
        return cls(systems, buckets, q.get("signatures", {}), q.get("train_limit"), q.get("samples"),
                   q.get("length_unit"), q.get("min_bucket_sentences"), q.get("failed", {}), q.get("concatenated"),
                   q.get("verdict"), q.get("kept"), q.get("test_groups"))


@dataclass(frozen=True)
class StepCost:
    """One training step (medians over rounds, :class:`posnet_fairseq.benchmark.measurements.StepTiming`)."""

    tokens: int
    tokens_per_s: float
    tokens_per_cpu_s: float
    step_kb: float
    saved_bytes: float
    flops_per_token: Optional[float] = None


@dataclass(frozen=True)
class DecodeCost:
    """Decoding at one forced output length (medians), or ``beyond``: the model takes that many positions."""

    rate: Optional[float] = None
    cpu_s: Optional[float] = None
    beyond: Optional[int] = None


@dataclass(frozen=True)
class Cost:
    parameters: Dict[str, Tuple[int, Optional[int]]]  # {arch: (trained, after precomputation or None)}
    steps: Dict[str, StepCost]
    decoding: Dict[str, Dict[str, DecodeCost]]  # {arch: {length: ...}}
    decoding_flops: Dict[str, Dict[str, float]]  # {arch: {length: FLOPs per generated token}}
    settings: dict  # decode_lengths, step_batch, ... as the command line gave them
    # the first model converted with CTranslate2: {"ctranslate2 fp32" / "ctranslate2 int8": {length: ...}}, or
    # {"missing": why not}; None: a cost.json from before it was measured
    ctranslate2: Optional[dict] = None

    @classmethod
    def read(cls, c):
        steps = {arch: StepCost(s["tokens"], s["tokens_per_s"], s["tokens_per_cpu_s"], s["step_kb"],
                                s["saved_bytes"], s.get("flops_per_token"))
                 for arch, s in c["training_steps"].items()}
        decoding = {arch: {str(n): DecodeCost(e.get("rate"), e.get("cpu_s"), e.get("beyond"))
                           for n, e in per.items()} for arch, per in c["decoding"].items()}
        flops = {arch: {str(n): v for n, v in per.items()} for arch, per in c.get("decoding_flops", {}).items()}
        parameters = {arch: (p["params"], p["precomputed"]) for arch, p in c["parameters"].items()}
        settings = {k: c.get(k) for k in ("decode_lengths", "decode_sentences", "decode_beam", "decode_batch",
                                          "decode_rounds", "step_rounds", "timed_steps", "step_length",
                                          "step_batch", "precompute_length")}
        converted = c.get("ctranslate2")
        if converted and "missing" not in converted:
            converted = {row: {str(n): DecodeCost(e.get("rate"), e.get("cpu_s"), e.get("beyond"))
                               for n, e in per.items()} for row, per in converted.items()}
        return cls(parameters, steps, decoding, flops, settings, converted)


@dataclass(frozen=True)
class TrainOutcome:
    """One model's training: its averaged checkpoint, or why it failed. A finished one is the record of its step
    train/MODEL (:meth:`stored`, :meth:`read`)."""

    arch: str
    checkpoint: Optional[str] = None
    averaged: List[str] = field(default_factory=list)  # the files averaged into ``checkpoint``
    epochs: Optional[int] = None
    updates: Optional[int] = None
    failed: Optional[str] = None
    converged: Optional[bool] = None  # --budget converge: stopped by its patience (False: by the cap)
    trained_as: Optional[str] = None  # the model whose training this one shares (Trainer.run)
    reused_from: Optional[str] = None  # the run of --reuse-from it was trained in

    def stored(self):
        """What the step train/MODEL keeps (its result): not the name and checkpoint, which the step itself
        names; ``trained_as`` and ``reused_from`` only where set, so that a run's records stay readable by
        versions before them."""
        optional = ("trained_as", "reused_from")
        return {k: v for k, v in asdict(self).items()
                if k not in ("arch", "checkpoint", "failed") and (k not in optional or v is not None)}

    @classmethod
    def read(cls, arch, checkpoint, stored):
        """The outcome of the step train/``arch`` whose averaged checkpoint is ``checkpoint``, from what
        :meth:`stored` kept."""
        return cls(arch, checkpoint, **stored)
