"""A paper table as declared once: its columns, its rows and their labels, each row's training on each
dataset (the fairseq-train flags, the decoding, averaging and batch settings), its marks and the paper's figures.

The paper modules (:mod:`.posnet`, :mod:`.aan`, :mod:`.gaussian`, :mod:`.tisa`) declare their tables with
these records; the recipes' plans (:mod:`.rows`), the result tables (``evaluation/tables.py``) and the
tests read them. This module imports nothing from the package: the recipes read the declarations without
loading fairseq (see :mod:`.rows`).
"""
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

METRIC_LABELS = {"sacrebleu": "BLEU", "bleu_tok": "BLEU", "bleurt": "BLEURT", "comet": "COMET", "meteor": "METEOR"}


def flags(text):
    """A flag list written as the shell writes it; no value of the recipes' flags holds a space."""
    return tuple(text.split())


def with_value(words, flag, value):
    """``words`` with ``flag``'s value replaced where it stands (the flag stays written once)."""
    i = words.index(flag) + 1
    return words[:i] + (value,) + words[i + 1:]


@dataclass(frozen=True)
class Column:
    key: str
    dataset: str
    metric: str  # sacrebleu, bleu_tok, bleurt, comet, meteor, params, train_speed, decode_speed, sent_per_sec
    label: str
    split: str = "test"
    ours: bool = True  # False: no recipe here prepares this dataset; the paper's figures only


def col(dataset, metric, label, ours=True):
    return Column(f"{dataset}:{metric}", dataset, metric, label, ours=ours)


def scores(dataset, lang, metrics=("sacrebleu", "bleurt", "comet")):
    return [col(dataset, m, f"{lang} {METRIC_LABELS[m]}") for m in metrics]


@dataclass(frozen=True)
class Settings:
    """How a paper trains and decodes at one size: what the rows of that size share."""
    train: Tuple[str, ...]  # fairseq-train flags after the model's (optimisation, schedule, checkpoints)
    gen: Tuple[str, ...]  # fairseq-generate flags
    avg: str  # "best N": checkpoint_best.pt and the N-1 update checkpoints after it; "last N": the last N
    tokens: int = 0  # the paper's target tokens per update (reached with --update-freq); 0: the row's --max-tokens
    eval: Tuple[str, ...] = ()  # flags of posnet_fairseq.evaluation.evaluate

    def __post_init__(self):
        """The checkpoints the averaging reads are kept whatever update turns out best: refused here, when the
        table is declared (its dry run), not when the averaging step finds them deleted after the training."""
        rule, count = self.avg.split()
        count = int(count)
        kept = {f: int(self.train[self.train.index(f) + 1]) if f in self.train else None
                for f in ("--keep-interval-updates", "--keep-best-checkpoints")}
        window = kept["--keep-interval-updates"]  # None: fairseq keeps every update checkpoint
        if window is None:
            return
        if rule == "last" and window < count:
            raise ValueError(f"averaging 'last {count}' needs --keep-interval-updates {count} or more in the training "
                             f"flags (they keep {window})")
        # The update checkpoints after an early best are deleted by --keep-interval-updates; the N best copies
        # (fairseq's --keep-best-checkpoints) are what the averaging then reads (checkpoint_averaging.py).
        if rule == "best" and (kept["--keep-best-checkpoints"] or 0) < count:
            raise ValueError(f"averaging 'best {count}' needs --keep-best-checkpoints {count} in the training flags "
                             f"(they keep {kept['--keep-best-checkpoints'] or 0}): without them a best checkpoint "
                             f"older than the --keep-interval-updates {window} window stops the table after its "
                             "training")


@dataclass(frozen=True)
class Run:
    """One model the recipe trains: a row on one dataset."""
    row: str
    dataset: str
    flags: Tuple[str, ...]  # every fairseq-train flag of the row, in the plan's order
    settings: Settings


def run(row, dataset, settings, model, after=()):
    """The row's ``model`` flags, then its size's training flags, then ``after``."""
    return Run(row, dataset, tuple(model) + settings.train + tuple(after), settings)


def rows_and_runs(dataset, settings, entries):
    """(rows, runs) of rows that each train once, on ``dataset``: ``entries`` are (row, label, model flags)
    or (row, label, model flags, flags after the settings')."""
    entries = [tuple(e) + ((),) * (4 - len(e)) for e in entries]
    return [(row, label) for row, label, _, _ in entries], \
        [run(row, dataset, settings, model, after) for row, _, model, after in entries]


@dataclass
class Table:
    name: str  # the recipe's table name: <paper>-table<N> or <paper>-figure<N>
    title: str
    columns: List[Column]
    rows: List[Tuple[str, str]]  # (row key, the paper's label), top to bottom
    runs: List[Run]
    paper: Dict[str, str] = field(default_factory=dict)  # row -> its figures in column order ('.' = none)
    marks: List[Tuple[str, str]] = field(default_factory=list)  # (baseline row, mark) as the paper marks
    reference: Dict[str, str] = field(default_factory=dict)  # row -> the row its speed ratios are against
    notes: List[str] = field(default_factory=list)
    micro_flags: Tuple[str, ...] = ()  # added to the --micro flags (later flags win)
    figures: Dict[str, Dict[str, str]] = field(init=False)  # row -> {column key: the paper's figure}

    def __post_init__(self):
        keys = [key for key, _ in self.rows]
        if len(set(keys)) != len(keys) or {r.row for r in self.runs} != set(keys):
            raise ValueError(f"{self.name}: the runs' rows {sorted({r.row for r in self.runs})} are not the "
                             f"table's rows {keys}, each once")
        self.figures = {}
        for row, text in self.paper.items():
            cells = text.split()
            if row not in keys or len(cells) != len(self.columns):
                raise ValueError(f"{self.name}: paper row {row}: {len(cells)} figures for {len(self.columns)} "
                                 "columns, or no such row")
            self.figures[row] = {c.key: v for c, v in zip(self.columns, cells) if v != "."}

    @property
    def baselines(self):
        """The rows the others are tested against (paired bootstrap), in the order of their marks."""
        return [row for row, _ in self.marks]
