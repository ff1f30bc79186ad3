"""The figures of a ``posnet-compare`` run as frozen, typed records, and a training's outcome
(:class:`TrainOutcome`, kept by its step train/MODEL).

The scoring step (:func:`posnet_fairseq.compare.quality.score`) produces a :class:`Quality`, the cost step
(:func:`posnet_fairseq.compare.cost.measure`) a :class:`Cost`; ``quality.json`` and ``cost.json`` are their
serialised form (:meth:`Quality.stored`, :meth:`Cost.stored`, read back by ``read``), in the key order and
number formatting scripts and the saved ``docs/compare`` runs know. The open-ended parts measured outside
``compare/`` (a training step's figures, a decoding round's, the verdict's tests) are read-only mappings
(:func:`frozen`), serialised in place.
"""
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import List, Mapping, Optional, Tuple

from .concatenated import bucket_label, bucket_name


def frozen(value):
    """A JSON value made read-only: objects as read-only mappings, arrays as tuples (their order kept)."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: frozen(v) for key, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value):
    """The JSON value of a :func:`frozen` one (or of a record's field), for ``json.dump``."""
    if hasattr(value, "stored"):
        return value.stored()
    if isinstance(value, Mapping):
        return {key: thawed(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(v) for v in value]
    return value


def _empty():
    return MappingProxyType({})


def read_each(items, read):
    """{key: read(value)} of a JSON object, read-only."""
    return MappingProxyType({key: read(value) for key, value in items.items()})


@dataclass(frozen=True)
class Score:
    """One metric of one model (:func:`posnet_fairseq.evaluation.bootstrap.against_first`): sacreBLEU's score,
    the bootstrap mean and 95% half-width, the one-sided p-values against the first model (None for it), and
    the two-sided p-value with its direction where it is at most 0.05 (only beside a one-sided one)."""

    score: float
    mean: float
    ci: float
    p: Optional[float] = None
    direction: Optional[str] = None
    p_value: Optional[float] = None
    p_value_worse: Optional[float] = None

    def stored(self):
        kept = {"score": self.score, "mean": self.mean, "ci": self.ci, "p_value": self.p_value,
                "p_value_worse": self.p_value_worse}
        return kept if self.p_value is None else dict(kept, p=self.p, direction=self.direction)

    @classmethod
    def read(cls, entry):
        return cls(entry["score"], entry.get("mean"), entry.get("ci"), entry.get("p"), entry.get("direction"),
                   entry.get("p_value"), entry.get("p_value_worse"))


@dataclass(frozen=True)
class System:
    bleu: Score
    chrf: Score
    skipped: int  # test sentences fairseq-generate skipped (longer than the model takes)
    limits: Tuple[int, int]  # (source, target) positions

    def stored(self):
        return {"skipped": self.skipped, "limits": list(self.limits), "bleu": self.bleu.stored(),
                "chrf": self.chrf.stored()}

    @classmethod
    def read(cls, s):
        return cls(Score.read(s["bleu"]), Score.read(s["chrf"]), s["skipped"], tuple(s["limits"]))


@dataclass(frozen=True)
class BucketScore:
    """One model on one bucket: its BLEU (``bootstrap``), the sentences of the bucket it skipped and its
    hypothesis / reference length; or ``beyond``: it takes this many positions, fewer than every sentence."""

    bootstrap: Optional[Score] = None
    skipped: Optional[int] = None
    length_ratio: Optional[float] = None
    beyond: Optional[int] = None

    @property
    def score(self):
        return self.bootstrap and self.bootstrap.score

    @property
    def ci(self):
        return self.bootstrap and self.bootstrap.ci

    def stored(self):
        if self.beyond is not None:
            return {"beyond": self.beyond}
        return dict(self.bootstrap.stored(), skipped=self.skipped, length_ratio=self.length_ratio)

    @classmethod
    def read(cls, e):
        if "beyond" in e:
            return cls(beyond=e["beyond"])
        return cls(Score.read(e), e.get("skipped"), e.get("length_ratio"))


@dataclass(frozen=True)
class Bucket:
    lo: int
    hi: int
    sentences: int
    beyond_training: bool
    too_small: bool
    scores: Mapping[str, BucketScore]
    concatenated: Optional[int] = None  # K: the bucket holds examples of K test pairs joined (--concat-test)

    @property
    def name(self):
        return bucket_name(self.lo, self.hi, self.concatenated)

    @property
    def label(self):
        return bucket_label(self.lo, self.hi, self.concatenated)

    def stored(self):
        kept = {"lo": self.lo, "hi": self.hi, "sentences": self.sentences, "beyond_training": self.beyond_training,
                "too_small": self.too_small, "scores": thawed(self.scores)}
        return kept if self.concatenated is None else dict(kept, concatenated=self.concatenated)

    @classmethod
    def read(cls, b):
        return cls(b["lo"], b["hi"], b["sentences"], b["beyond_training"], b.get("too_small", False),
                   read_each(b["scores"], BucketScore.read), b.get("concatenated"))


# quality.json's keys in the order it has them; those of _OPTIONAL only where set.
_QUALITY_KEYS = ("signatures", "systems", "buckets", "train_limit", "baseline", "samples", "concatenated",
                 "min_bucket_sentences", "length_unit", "failed", "seeds", "verdict", "test_groups", "kept")
_OPTIONAL = ("concatenated", "test_groups")


@dataclass(frozen=True)
class Quality:
    """The scoring step's record (OUT/quality.json): :func:`posnet_fairseq.compare.quality.score` gives the
    scores, the run adds its settings and verdict (``dataclasses.replace``)."""

    systems: Mapping[str, System]
    buckets: Tuple[Bucket, ...]
    signatures: Mapping[str, str]
    train_limit: int
    samples: int
    length_unit: Optional[str]
    min_bucket_sentences: Optional[int]
    failed: Mapping[str, str] = field(default_factory=_empty)  # {model: why its translation failed}
    concatenated: Optional[Mapping] = None  # --concat-test: what results.md says of the joined examples
    # {arch: {"in range"|"beyond"|"joined": posnet_fairseq.compare.verdict.Test's JSON or None}}; None: not judged
    verdict: Optional[Mapping] = None
    kept: Optional[Mapping] = None  # {arch: {bucket label: {"kept", "against"}}}: posnet_fairseq.compare.verdict.kept
    test_groups: Optional[Mapping] = None  # --test-groups: posnet_fairseq.compare.test_groups.summary
    baseline: Optional[str] = None  # the model every p-value is against
    seeds: Optional[Tuple[int, ...]] = None

    def stored(self):
        """quality.json's value."""
        return {key: thawed(getattr(self, key)) for key in _QUALITY_KEYS
                if key not in _OPTIONAL or getattr(self, key) is not None}

    @classmethod
    def read(cls, q):
        """The record of a quality.json (one of an earlier version too: what it lacks is None)."""
        return cls(read_each(q["systems"], System.read), tuple(Bucket.read(b) for b in q["buckets"]),
                   frozen(q.get("signatures", {})), q.get("train_limit"), q.get("samples"), q.get("length_unit"),
                   q.get("min_bucket_sentences"), frozen(q.get("failed", {})),
                   *(frozen(q.get(key)) for key in ("concatenated", "verdict", "kept", "test_groups", "baseline",
                                                    "seeds")))

    def merged(self, other):
        """This record with ``other``'s systems and bucket scores beside its own (the same buckets, other
        models: another seed's)."""
        return replace(self, systems=MappingProxyType({**self.systems, **other.systems}),
                       buckets=tuple(replace(b, scores=MappingProxyType({**b.scores, **o.scores}))
                                     for b, o in zip(self.buckets, other.buckets)))


@dataclass(frozen=True)
class Parameters:
    """A checkpoint's parameters, and for a PosNet whose energies fold into tables, after that folding at
    ``precompute_length`` positions (None: not applicable)."""

    params: int
    precomputed: Optional[int] = None
    precompute_length: Optional[int] = None

    def stored(self):
        kept = {"params": self.params, "precomputed": self.precomputed}
        return kept if self.precompute_length is None else dict(kept, precompute_length=self.precompute_length)

    @classmethod
    def read(cls, p):
        return cls(p["params"], p["precomputed"], p.get("precompute_length"))


@dataclass(frozen=True)
class StepCost:
    """One training step (:meth:`posnet_fairseq.benchmark.measurements.StepTiming.record`: its keys depend on
    the device), as measured; the report's figures read from it by name."""

    measured: Mapping = field(default_factory=_empty)

    tokens = property(lambda self: self.measured["tokens"])
    tokens_per_s = property(lambda self: self.measured["tokens_per_s"])
    tokens_per_cpu_s = property(lambda self: self.measured["tokens_per_cpu_s"])
    step_kb = property(lambda self: self.measured["step_kb"])
    saved_bytes = property(lambda self: self.measured["saved_bytes"])
    flops_per_token = property(lambda self: self.measured.get("flops_per_token"))

    def with_speed(self, tokens_per_s):
        """This step with another throughput (a GPU's: fairseq-train's own), in the same place."""
        return StepCost(frozen({**self.measured, "tokens_per_s": tokens_per_s}))

    def stored(self):
        return thawed(self.measured)


@dataclass(frozen=True)
class DecodeCost:
    """Decoding at one forced output length (:meth:`posnet_fairseq.benchmark.measurements.DecodeTiming.record`,
    medians; a GPU's rounds hold more), or {"beyond": N}: the model takes that many positions."""

    measured: Mapping = field(default_factory=_empty)

    rate = property(lambda self: self.measured.get("rate"))
    cpu_s = property(lambda self: self.measured.get("cpu_s"))
    beyond = property(lambda self: self.measured.get("beyond"))

    def stored(self):
        return thawed(self.measured)


def per_length(per):
    """{length: DecodeCost} of one model's (or CTranslate2 row's) JSON, the lengths as strings."""
    return MappingProxyType({str(n): DecodeCost(frozen(e)) for n, e in per.items()})


def flops_per_length(per):
    """{length: FLOPs per generated token} of one model's JSON, the lengths as strings."""
    return frozen({str(n): v for n, v in per.items()})


# The measuring settings cost.json repeats after the figures, for scripts that read them there: written from
# Cost.settings, never read back but from a cost.json made before the step's settings were stored whole.
SETTINGS_REPEATED = ("decode_lengths", "decode_sentences", "decode_beam", "decode_batch", "decode_rounds",
                     "step_rounds", "timed_steps", "step_length", "step_batch")


@dataclass(frozen=True)
class Cost:
    """The cost step's record (OUT/cost.json, :func:`posnet_fairseq.compare.cost.measure`)."""

    parameters: Mapping[str, Parameters]
    steps: Mapping[str, StepCost]
    decoding: Mapping[str, Mapping[str, DecodeCost]]  # {arch: {length: ...}}
    decoding_flops: Mapping[str, Mapping[str, float]]  # {arch: {length: FLOPs per generated token}}
    settings: Mapping  # the step "cost"'s settings: decode_lengths, step_batch, ... as the command line gave them
    precompute_length: Optional[str] = None  # the table lengths the PosNet energies were folded at, joined
    # the first model converted with CTranslate2: {"ctranslate2 fp32" / "ctranslate2 int8": {length: ...}}, or
    # {"missing": why not}; None: a cost.json from before it was measured
    ctranslate2: Optional[Mapping] = None
    devices: Optional[str] = None  # where it was measured (posnet_fairseq.compare.devices.Plan.describe)

    def stored(self):
        """cost.json's value."""
        return {"settings": thawed(self.settings), "parameters": thawed(self.parameters),
                "training_steps": thawed(self.steps), "decoding": thawed(self.decoding),
                "decoding_flops": thawed(self.decoding_flops), "ctranslate2": thawed(self.ctranslate2),
                **{key: thawed(self.settings.get(key)) for key in SETTINGS_REPEATED},
                "precompute_length": self.precompute_length, "devices": self.devices}

    @classmethod
    def read(cls, c):
        """The record of a cost.json (one of an earlier version too: what it lacks is None)."""
        converted = c.get("ctranslate2")
        if converted and "missing" not in converted:
            converted = read_each(converted, per_length)
        settings = c.get("settings") or {key: c.get(key) for key in SETTINGS_REPEATED}
        return cls(read_each(c["parameters"], Parameters.read),
                   read_each(c["training_steps"], lambda s: StepCost(frozen(s))), read_each(c["decoding"], per_length),
                   read_each(c.get("decoding_flops", {}), flops_per_length), frozen(settings),
                   c.get("precompute_length"), frozen(converted), c.get("devices"))


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
