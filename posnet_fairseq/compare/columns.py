"""The columns of results.md's tables, each declared once, and the legend under the main table.

A :class:`Column` holds everything about one column: its csv key (the field of results.csv and of
results.json's rows that its cell reads), its header, its cell, its legend lines and what the plots draw
from it. A column ``over`` the length buckets or the forced output lengths is one column per bucket or
length, its key a template (``bleu_len_{bucket}``, ``decode_{length}_sentences_per_s``).

Adding a column: its producer writes the key into each row (:func:`posnet_fairseq.compare.report.rows`),
and one declaration here puts it into :data:`TABLE` (the order of results.md's main table) and, where it
needs words, :data:`LEGEND` (the order of the lines under the table).
"""
from dataclasses import dataclass
from typing import Callable, Optional

from ..benchmark.measurements import ratio as _ratio
from . import concatenated, seeds as _seeds


@dataclass(frozen=True)
class View:
    """What a column's header, cell and legend read besides the row: the run as the report sees it."""

    base: str  # the baseline: the first model
    seed_list: list
    quality: object  # posnet_fairseq.compare.records.Quality
    cost: object  # posnet_fairseq.compare.records.Cost
    converge: bool  # --budget converge: the table says which model converged

    @property
    def several(self):
        return _seeds.several(self.seed_list)

    @property
    def lengths(self):
        return self.cost.settings["decode_lengths"]


def _nothing(view):
    return []


@dataclass(frozen=True)
class Column:
    """One column of a results table (see the module docstring)."""

    key: str  # csv key, or a template with {bucket} (a bucket's name) or {length} (a forced output length)
    header: Callable  # (view, item) -> the header; item: the bucket or length of a column ``over`` them
    cell: Callable  # (row, view, key) -> the cell of one model's row
    over: Optional[str] = None  # "buckets" | "lengths": one column per length bucket / per forced output length
    shown: Callable = lambda view: True  # whether the run has this column
    legend: Callable = _nothing  # (view) -> its lines under the table
    plot: str = ""  # what the plots (posnet_fairseq.compare.plots) draw from it

    def key_of(self, item=None):
        """The csv key of the column of ``item`` (a bucket's name or an output length)."""
        return self.key.format(bucket=item, length=item)

    def items(self, view):
        """(header, key) of each column this declaration makes in ``view``."""
        if self.over == "buckets":
            return [(self.header(view, b), self.key_of(b.name)) for b in view.quality.buckets]
        if self.over == "lengths":
            return [(self.header(view, n), self.key_of(n)) for n in view.lengths]
        return [(self.header(view, None), self.key)]


def num(value, fmt):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return format(value, fmt)


def _with_ratio(value, ratio, fmt):
    if isinstance(value, str) or value is None:
        return num(value, fmt)
    return f"{format(value, fmt)} ({num(ratio, '.2f')})"


def _quality_cell(row, view, key):
    """A quality figure: mean ± sd over the seeds, or sacreBLEU's score (bootstrap mean ± 95% half-width)."""
    if view.several:
        return _seeds.mean_sd(row, key)
    if row.get(key) is None:
        return "-"
    return f"{row[key]:.1f} ({row[key + '_mean']:.1f} ± {row[key + '_ci']:.1f})"


def _p_cell(row, view, key):
    if row["arch"] == view.base:
        return "(baseline)"
    return num(row.get(key), ".4f") + (f" ({row['bleu_direction']})" if row.get("bleu_direction") else "")


def _updates_cell(row, view, key):
    cell = _seeds.mean_sd(row, key, ".0f") if view.several else num(row.get(key), ",")
    return cell + (" (not converged)" if row.get("converged") is False else "")


def _ceiling_cell(row, view, key):
    """"CEILINGx (SHARE)" of the PREFIX_ceiling and PREFIX_share figures
    (:func:`posnet_fairseq.benchmark.measurements.against`)."""
    ceiling, share = row.get(key), row.get(key.replace("_ceiling", "_share"))
    if ceiling is None:
        return "-"
    return f"{ceiling:.2f}x ({'-' if share is None else format(share, '.0%')})"


def _speed_cell(ratio, fmt):
    """The cell "VALUE (RATIO)" of a figure and its ratio to the baseline (key ``ratio``, a template too)."""
    def cell(row, view, key):
        # A decoding key is decode_L_...: its L names the ratio's; the other ratios' keys have no {length}.
        return _with_ratio(row.get(key), row.get(ratio.format(length=key.split("_")[1])), fmt)
    return cell


def _bleu_legend(view):
    if view.several:
        return [f"- BLEU / chrF / BLEU a-b: sacreBLEU, the mean ± the standard deviation over the seeds "
                f"{', '.join(map(str, view.seed_list))} (each seed's value in results.csv, `bleu_seedS`; each seed's "
                "bootstrap interval and p-value against the baseline's same seed in quality.json); whether a "
                "difference lies inside the noise: the Verdict below."]
    return [f"- BLEU / chrF: sacreBLEU on the whole test set, then (in brackets) the bootstrap mean ± the 95% "
            f"confidence half-width; p: paired bootstrap against `{view.base}` ({view.quality.samples} resamples, "
            "every model on the same ones; posnet_fairseq.evaluation.bootstrap), two-sided: twice the smaller of "
            "P(not better) and P(not worse), with the direction where it is at most 0.05."]


def _updates_legend(view):
    several = view.several
    return [f"- updates: the updates each model trained{' (mean ± sd over the seeds)' if several else ''}; "
            "(not converged): stopped by the cap of --budget converge before its validation loss stopped improving"
            f"{' (in at least one seed)' if several else ''}."]


def _bucket_legend(view):
    q = view.quality
    return [f"- BLEU a-b (n=N): corpus BLEU on the N test sentences with a source length of a to b "
            f"{q.length_unit}. * = beyond the training lengths: every training pair has at most {q.train_limit} "
            f"{q.length_unit} per side. A bucket of fewer than {num(q.min_bucket_sentences, 'd')} "
            "sentences is merged into its neighbour on the same side of the training lengths; one that cannot be "
            "reads 'too few sentences' and is not scored.",
            *concatenated.legend(q.concatenated, q.length_unit)]


def _precomputed_legend(view):
    length = view.cost.precompute_length
    if length:
        return ["- params, precomputed: after folding the aPosNet/rPosNet energies into tables of "
                f"{length} positions (`posnet-precompute`); '-' where nothing is precomputed."]
    return ["- params, precomputed: '-': no model of this run has position energies to fold into tables "
            "(`posnet-precompute`)."]


def _train_legend(view):
    c = view.cost.settings
    return [f"- train tokens/s: one training step (forward, backward, Adam) on {c['step_batch']} x "
            f"{c['step_length']} random tokens, one thread, median over {c['step_rounds']} rounds of "
            f"{c['timed_steps']} steps (on a GPU: fairseq-train's own throughput); step memory: the peak resident "
            f"memory the step adds to the built model. Ratios against `{view.base}` measured in the same run."]


def _decode_legend(view):
    c = view.cost.settings
    return [f"- decode: fairseq-generate, beam {c['decode_beam']}, {c['decode_sentences']} sentences in "
            f"batches of {c['decode_batch']}, every hypothesis forced to L tokens (+ EOS), one thread, median of "
            f"{c['decode_rounds']} rounds with the models alternating; ratio against `{view.base}`. CPU timings on a "
            "machine shared with other jobs are noisy; `results.csv` also has the CPU-time ratios."]


def _ceiling_legend(view):
    base = view.base
    return [f"- ceiling (share): the speed ratio the model's arithmetic allows against `{base}`, i.e. `{base}`'s "
            "FLOPs per token over the model's (per training token: the step above, forward and backward; per "
            "generated token: beam search to L tokens on the speed sentences' mean source length; matrix products "
            "only, posnet_fairseq.benchmark.flops), and in brackets the share of it the measured ratio reaches "
            "(ratio / ceiling: below 100% the model loses time its arithmetic does not explain)."]


def _bucket_header(view, bucket):
    return f"BLEU {bucket.label}{' *' if bucket.beyond_training else ''} (n={bucket.sentences})"


def _figure_cell(fmt):
    def cell(row, view, key):
        return _seeds.mean_sd(row, key, fmt) if view.several else num(row.get(key), fmt)
    return cell


def _kept_cell(row, view, key):
    return _figure_cell(".0f")(row, view, key) + "%" if key in row else "-"


MODEL = Column("arch", lambda view, _: "model", lambda row, view, key: f"`{row[key]}`")
UPDATES = Column("updates", lambda view, _: "updates", _updates_cell, shown=lambda view: view.converge,
                 legend=_updates_legend)
PARAMS = Column("params", lambda view, _: "params", lambda row, view, key: num(row.get(key), ","))
PRECOMPUTED = Column("params_precomputed", lambda view, _: "params, precomputed",
                     lambda row, view, key: num(row.get(key), ","), legend=_precomputed_legend)
BLEU = Column("bleu", lambda view, _: "BLEU", _quality_cell, legend=_bleu_legend,
              plot="bleu_vs_speed: each model's height (with several seeds: its mean, sd and each seed's)")
CHRF = Column("chrf", lambda view, _: "chrF", _quality_cell)
P_BLEU = Column("bleu_p", lambda view, _: f"p (BLEU) vs {view.base}", _p_cell, shown=lambda view: not view.several)
BUCKET_BLEU = Column("bleu_len_{bucket}", _bucket_header, _figure_cell(".1f"), over="buckets",
                     legend=_bucket_legend,
                     plot="bleu_by_length: a cell of the model x bucket map, coloured by its gap to the baseline")
TRAIN_SPEED = Column("train_tokens_per_s", lambda view, _: "train tokens/s (ratio)",
                     _speed_cell("train_speed_ratio", ",.0f"), legend=_train_legend)
TRAIN_CEILING = Column("train_ceiling", lambda view, _: "train ceiling (share)", _ceiling_cell,
                       legend=_ceiling_legend)
STEP_MEMORY = Column("step_memory_mib", lambda view, _: "step memory MiB (ratio)",
                     _speed_cell("step_memory_ratio", ".1f"))
DECODE_SPEED = Column("decode_{length}_sentences_per_s", lambda view, n: f"decode L={n} sent/s (ratio)",
                      _speed_cell("decode_{length}_ratio", ".1f"), over="lengths", legend=_decode_legend,
                      plot="bleu_vs_speed: each model's place along the x axis (at the first length)")
DECODE_CEILING = Column("decode_{length}_ceiling", lambda view, n: f"decode L={n} ceiling (share)",
                        _ceiling_cell, over="lengths")
# The other tables of results.md: one column per bucket each.
LENGTH_RATIO = Column("length_ratio_{bucket}", lambda view, b: f"{b.label}{' *' if b.beyond_training else ''}",
                      _figure_cell(".2f"), over="buckets")
KEPT = Column("bleu_kept_{bucket}", lambda view, b: f"{b.label} *", _kept_cell, over="buckets")

# results.md's main table, in this order; a column over the output lengths comes in pairs (speed, ceiling).
TABLE = (MODEL, UPDATES, PARAMS, PRECOMPUTED, BLEU, CHRF, P_BLEU, BUCKET_BLEU, TRAIN_SPEED, TRAIN_CEILING,
         STEP_MEMORY, (DECODE_SPEED, DECODE_CEILING))


def table(view):
    """[(column, header, key)] of the main table's columns in ``view``, in the order of :data:`TABLE`."""
    out = []
    for entry in TABLE:
        if isinstance(entry, tuple):  # interleaved: each length's speed, then its ceiling
            per = [[(column, *item) for item in column.items(view)] for column in entry]
            out += [made for group in zip(*per) for made in group]
        elif entry.shown(view):
            out += [(entry, *item) for item in entry.items(view)]
    return out


def _shared_training(view, table):
    return [f"- `{row['arch']}` shares the training of `{_seeds.split(row['trained_as'], None)[0]}` (the same "
            "architecture, seed and training flags): it differs in its --arch-generate-flags only."
            for row in table if row.get("trained_as")]


def _reused(view, table):
    return [f"- `{row['arch']}`: taken from `{row['reused_from']}` by --reuse-from (trained there with the same "
            "data, recipe, budget, seed and flags)." for row in table if row.get("reused_from")]


def _ctranslate2(view, table):
    """The CTranslate2 rows: the baseline (and each other model that converts) converted and decoded as the models
    above, sentences/s (ratio to the baseline)."""
    converted, base = view.cost.ctranslate2, view.base
    if converted is None:
        return ["- CTranslate2: not measured in this run's cost.json (made before it was)."]
    if "missing" in converted:
        return [f"- CTranslate2: not measured: {converted['missing']}."]
    parts = []
    for row, per in converted.items():
        for n in view.lengths:
            entry, base_entry = per.get(str(n)), view.cost.decoding.get(base, {}).get(str(n))
            if entry is None or entry.beyond is not None:
                parts.append(f"{row} L={n}: beyond its {entry.beyond if entry else '?'} positions")
                continue
            ratio = _ratio(entry.rate, base_entry.rate if base_entry else None)
            parts.append(f"{row} L={n}: {entry.rate:.1f} sent/s ({num(ratio, '.2f')})")
    return [f"- CTranslate2: `{base}` converted in-process (a row named after another model: that model; the "
            "Transformer through ctranslate2's FairseqConverter, Shaw-relative and T5-bias models through "
            "posnet_fairseq.benchmark.ctranslate2_relative) and decoded with "
            "the same sources, forced lengths, beam and batch, one thread, alternating within each round; "
            "sentences/s (ratio to `" + base + "`): " + "; ".join(parts) + "."]


def _column_legend(column):
    return lambda view, table: column.legend(view) if column.shown(view) else []


# The lines under the main table, in this order: a column's own legend, or a note on the run.
LEGEND = (_column_legend(BLEU), _column_legend(UPDATES), _shared_training, _reused, _column_legend(BUCKET_BLEU),
          _column_legend(PRECOMPUTED), _column_legend(TRAIN_SPEED), _column_legend(DECODE_SPEED), _ctranslate2,
          _column_legend(TRAIN_CEILING))


def legend(view, table):
    return [line for entry in LEGEND for line in entry(view, table)]
