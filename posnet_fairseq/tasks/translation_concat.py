"""``--task translation_concat``: fairseq's translation task whose training set is augmented with
concatenated pairs (``concatenated_pairs.py``); validation and test sets are left as they are.

Its flags are fields of its fairseq config (fairseq's one declaration of a task's flags), checked when
the task is set up (errors name the flag).
"""
import logging
from dataclasses import dataclass, field
from typing import List, Optional

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from .concatenated_pairs import ConcatenatedPairsDataset

logger = logging.getLogger(__name__)


@dataclass
class TranslationConcatConfig(TranslationConfig):
    concat_max_pairs: int = field(default=2, metadata={
        "help": "a concatenated training example joins 2..K pairs (K drawn uniformly per example)"})
    concat_rate: float = field(default=0.5, metadata={
        "help": "the share of concatenated examples in the training set, in [0, 1) (0.5: one per pair)"})
    seed: int = II("common.seed")


def check(max_pairs: int, rate: float) -> Optional[str]:
    """Why these values of --concat-max-pairs and --concat-rate are refused, or None."""
    if max_pairs < 2:
        return f"--concat-max-pairs {max_pairs}: must be at least 2 (the pairs a concatenated example joins)"
    if not 0 <= rate < 1:
        return f"--concat-rate {rate}: the share of concatenated examples must be in [0, 1)"
    return None


def train_flags(max_pairs: int, rate: float) -> List[str]:
    """The fairseq-train flags of this task with K = ``max_pairs`` and the share ``rate``."""
    return ["--task", "translation_concat", "--concat-max-pairs", str(max_pairs), "--concat-rate", repr(rate)]


@register_task("translation_concat", dataclass=TranslationConcatConfig)
class TranslationConcatTask(TranslationTask):
    """TranslationTask whose training split is a :class:`ConcatenatedPairsDataset` (Varis & Bojar 2021)."""

    def __init__(self, cfg, src_dict, tgt_dict):
        refused = check(cfg.concat_max_pairs, cfg.concat_rate)
        if refused:
            raise ValueError(refused)
        super().__init__(cfg, src_dict, tgt_dict)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if split == self.cfg.train_subset:
            self.datasets[split] = ConcatenatedPairsDataset(
                self.datasets[split], self.cfg.concat_max_pairs, self.cfg.concat_rate, self.cfg.seed, epoch,
                self.cfg.max_source_positions, self.cfg.max_target_positions)
            dataset = self.datasets[split]
            logger.info(f"{split}: {len(dataset.pairs)} pairs and {len(dataset.counts)} examples of 2 to "
                        f"{self.cfg.concat_max_pairs} concatenated pairs (epoch {epoch})")
