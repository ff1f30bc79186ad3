"""The recipe every model of a ``posnet-compare`` run shares, declared once: the training budget
(:class:`Budget`), the optimiser, schedule, batch, checkpoints and averaging (:class:`Recipe`, whose field
defaults are the command line's), and the fairseq-train command they make. results.md's prose reads the
same declarations (:data:`ADAM_BETAS`, :data:`LABEL_SMOOTHING`)."""
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from ..plugin import PLUGIN_DIR
from ..process_pool import python_command
from .model_flags import architecture

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(e|epochs?|u|updates?|m|min|minutes?)\s*$")
CONVERGE = "converge"
# --budget converge: the tiny models on the synthetic corpus were still improving at 20 epochs (2,540 updates,
# docs/compare.md), so the cap is twice that; 10 validations of --interval 50 updates are 500 updates, about
# 4 epochs of that corpus without a better validation loss.
DEFAULT_CAP = "40e"
DEFAULT_PATIENCE = 10
ADAM_BETAS = "(0.9, 0.98)"
LABEL_SMOOTHING = 0.1


@dataclass(frozen=True)
class Budget:
    """The same training budget for every model: epochs, updates or minutes of training time; with
    ``patience`` (``--budget converge:CAP``) that budget is a cap, and a model stops earlier once its
    validation loss has not improved for ``patience`` validations (fairseq's ``--patience``)."""

    amount: float
    unit: str  # "epochs" | "updates" | "minutes"
    patience: Optional[int] = None

    @classmethod
    def parse(cls, text, patience=None):
        """``5e``, ``2000u``, ``20m``, or ``converge`` / ``converge:CAP`` (CAP one of those, default
        :data:`DEFAULT_CAP`) with ``patience`` validations (default :data:`DEFAULT_PATIENCE`)."""
        head, sep, cap = text.strip().partition(":")
        if head == CONVERGE:
            if sep and not cap:
                raise ValueError(f"--budget {text!r}: give the cap after the colon, e.g. converge:40e")
            capped = cls.parse(cap if sep else DEFAULT_CAP)
            return cls(capped.amount, capped.unit, DEFAULT_PATIENCE if patience is None else patience)
        if patience is not None:
            raise ValueError(f"--patience {patience} goes with --budget converge (the budget is {text})")
        match = _BUDGET.match(text)
        if not match or float(match.group(1)) <= 0:
            raise ValueError(f"--budget {text!r}: expected a positive number with a unit: "
                             f"5e (epochs), 2000u (updates) or 20m (minutes), or converge:CAP (converge:40e)")
        unit = {"e": "epochs", "u": "updates", "m": "minutes"}[match.group(2)[0]]
        amount = float(match.group(1))
        if unit != "minutes" and amount != int(amount):
            raise ValueError(f"--budget {text!r}: {unit} must be a whole number")
        return cls(amount, unit)

    def __str__(self):
        if self.patience:
            return (f"until the validation loss has not improved for {self.patience} validations, at most "
                    f"{self.amount:g} {self.unit}")
        return f"{self.amount:g} {self.unit}"

    def fairseq_flags(self):
        if self.unit == "epochs":
            return ["--max-epoch", str(int(self.amount))]
        if self.unit == "updates":
            return ["--max-update", str(int(self.amount))]
        # fairseq counts the training time of earlier runs (stored in the checkpoint) too.
        return ["--stop-time-hours", repr(self.amount / 60)]

    def used(self, epoch, step, steps_per_epoch, updates, seconds):
        """How much a model has trained, in the budget's unit."""
        if self.unit == "epochs":
            return epoch - 1 + step / max(steps_per_epoch, 1)
        if self.unit == "updates":
            return updates
        return seconds / 60

    def expected(self, finished: Iterable, steps_per_epoch: int):
        """How long, in the budget's unit, a model still training is expected to train (for the ETA): the
        budget; with ``patience``, the mean length of the ``finished`` models (TrainOutcome) that trained to a
        checkpoint (of this run and earlier ones), since the cap overstates every model that its patience stops (run (b)
        of docs/compare.md: 13-18 of 40 epochs). In epochs that length is updates / ``steps_per_epoch``, as
        :meth:`used` counts: a model that its patience stopped in epoch 18 has trained 17 and a part."""
        if self.patience and self.unit != "minutes":  # a finished model's minutes are not recorded
            lengths = [o.updates / (steps_per_epoch if self.unit == "epochs" else 1)
                       for o in finished if o.checkpoint and o.updates]
            if lengths:
                return min(self.amount, sum(lengths) / len(lengths))
        return self.amount


@dataclass
class Recipe:
    """What every model shares: seed, optimiser, schedule, batch, checkpoints and averaging."""

    seed: int = 1
    lr: float = 0.002
    warmup_updates: int = 200
    max_tokens: int = 2048
    dropout: float = 0.1
    interval: int = 50  # updates between validations and checkpoints
    average: int = 3  # last checkpoints averaged

    def fairseq_flags(self, budget):
        return [
            "--optimizer", "adam", "--adam-betas", ADAM_BETAS, "--lr", repr(self.lr),
            "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(self.warmup_updates),
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", repr(LABEL_SMOOTHING),
            "--dropout", repr(self.dropout), "--max-tokens", str(self.max_tokens), "--seed", str(self.seed),
            "--num-workers", "0", "--log-format", "simple", "--log-interval", "10",
            "--validate-interval-updates", str(self.interval), "--save-interval-updates", str(self.interval),
            "--keep-interval-updates", str(self.average), "--keep-last-epochs", str(self.average),
            # fairseq drops a last batch whose size is not a multiple of this (default 8): a small
            # validation set would lose sentences, one of fewer than 8 sentences all of them.
            "--required-batch-size-multiple", "1",
            "--skip-invalid-size-inputs-valid-test", *budget.fairseq_flags(),
            # converge: the best checkpoints (by validation loss) are kept to be averaged.
            *(["--patience", str(budget.patience), "--keep-best-checkpoints", str(self.average)] if budget.patience
              else []),
        ]


def train_command(data_bin, save_dir, arch, flags, recipe, budget, device_flags=()):
    return python_command("posnet_fairseq.cli.fairseq_wrappers", "train", data_bin, "--user-dir", PLUGIN_DIR,
                          "--arch", architecture(arch), "--save-dir", save_dir, *recipe.fairseq_flags(budget),
                          *device_flags, *flags)


def step_settings(recipe, budget, plan):
    """What every step train/ARCH depends on besides the data and its own flags: the shared recipe."""
    settings = {"budget": str(budget), **vars(recipe)}
    if plan.device == "cuda":
        settings.update(device="cuda", fp16=plan.fp16)
    return settings
