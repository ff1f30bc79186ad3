"""The papers' result tables: layouts, the papers' own figures, and collection of our results into them.

    python -m posnet_fairseq.evaluation.tables collect TABLE --results DIR --out PREFIX
    python -m posnet_fairseq.evaluation.tables rows TABLE

``collect`` reads DIR/ROW/DATASET/SPLIT/result.json (written by
:mod:`.evaluate`) and writes PREFIX.md and PREFIX.csv: one line per row, for
every column our number beside the paper's. Marks follow the paper: the
PosNet paper marks a difference to the Transformer with † and to Shaw et al.
with ‡ (paired bootstrap, p <= 0.05, better or worse); the AAN+ and
hard-coded Gaussian papers mark none. BLEURT and COMET are printed times 100,
as the PosNet paper does; speed columns are ratios to the row's reference
(the Transformer of the same size), as the AAN+ paper prints them, except
sentences per second (the hard-coded Gaussian paper's Tables 3 and 7), which
are absolute, from fairseq-generate's own timing. A cell we
have no result for is ``-``; a column whose dataset no recipe here prepares
holds the paper's figures only.

``PAPER`` holds every figure of the papers' tables, copied row by row from
the papers (shared/papers/), with their significance marks.
"""
import argparse
import csv
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

# What a metric is called in the tables, and how our result prints.
SCALED = {"bleurt", "comet"}  # result scores in -1..1, the paper prints them times 100
SPEED = {"train_speed": ("train_wps", "wps", False), "decode_speed": ("decode_seconds", "seconds", True)}


@dataclass
class Column:
    key: str
    dataset: str
    metric: str  # sacrebleu, bleu_tok, bleurt, comet, meteor, params, train_speed, decode_speed, sent_per_sec
    label: str
    split: str = "test"
    ours: bool = True  # False: no recipe here prepares this dataset; the paper's figures only


@dataclass
class Table:
    title: str
    columns: List[Column]
    rows: List[Tuple[str, str]]  # (row key as in the recipe, the paper's label)
    marks: List[Tuple[str, str]] = field(default_factory=list)  # (baseline row, mark) as the paper marks
    reference: Dict[str, str] = field(default_factory=dict)  # row -> the row its speed ratios are against
    notes: List[str] = field(default_factory=list)


def _col(dataset, metric, label, **kw):
    return Column(f"{dataset}:{metric}", dataset, metric, label, **kw)


def _scores(dataset, lang, metrics=("sacrebleu", "bleurt", "comet")):
    names = {"sacrebleu": "BLEU", "bleu_tok": "BLEU", "bleurt": "BLEURT", "comet": "COMET", "meteor": "METEOR"}
    return [_col(dataset, m, f"{lang} {names[m]}") for m in metrics]


def _paper(columns, rows):
    """{row: {column key: figure}} from one whitespace-separated string per row, in column order ('' = none)."""
    out = {}
    for row, text in rows.items():
        cells = text.split()
        if len(cells) != len(columns):
            raise ValueError(f"paper row {row}: {len(cells)} figures for {len(columns)} columns")
        out[row] = {c.key: v for c, v in zip(columns, cells) if v != "."}
    return out


_POSNET_MARKS = [("transformer", "†"), ("shaw", "‡")]
_POSNET_NOTE = ("Params: ours counts the trained model (unique parameters); the paper counts aPosNet and rPosNet after "
                "folding the position energies into N = 128 tables (its Table 7): posnet-precompute gives that count.")
_POSNET_ROWS = [("transformer", "Transformer"), ("shaw", "Shaw et al. (2018)"), ("fouriernet", "FourierNet"),
                ("gaussiannet", "GaussianNet"), ("linearnet", "LinearNet"), ("lightconv", "LightConv"),
                ("glinearnet", "gLinearNet"), ("aposnet", "aPosNet"), ("rposnet", "rPosNet")]

# The datasets as each paper prepared them (posnet_fairseq/table_runs/datasets.py): PosNet's BPE (44k En-De,
# 40k En-Fr) and AAN+'s (32k both) are different preparations of one corpus.
PN_DE, PN_FR, AAN_DE, AAN_FR = "wmt14_en_de_bpe44k", "wmt14_en_fr_bpe40k", "wmt14_en_de_bpe32k", "wmt14_en_fr_bpe32k"
_T2 = [_col(PN_DE, "params", "Params (En-De)")] + _scores(PN_DE, "En-De") + \
    _scores(PN_FR, "En-Fr") + _scores("wmt18_en_zh", "En-Zh")
_T3 = [_col(PN_DE, "params", "Big Params")] + _scores(PN_DE, "Big En-De") + \
    [_col("iwslt14_de_en", "params", "Small Params")] + _scores("iwslt14_de_en", "Small De-En")
_T4 = _scores(PN_DE, "En-De")
_T5 = [_col("wmt18_en_zh", "params", "Params")] + _scores("wmt18_en_zh", "En-Zh")
_T6 = [_col(PN_DE, "params", "Params")] + _scores(PN_DE, "En-De")


def _aan_columns(dataset, lang, train=True):
    cols = [_col(dataset, "params", "#Params")]
    if train:
        cols.append(_col(dataset, "train_speed", "ΔTrain"))
    return cols + [_col(dataset, "decode_speed", "ΔDecode")] + _scores(dataset, lang, ("bleu_tok", "meteor"))


_A2, _A4, _A7 = _aan_columns(AAN_DE, "En-De"), _aan_columns(AAN_DE, "En-De", train=False), \
    _aan_columns(AAN_FR, "En-Fr")
_A5 = [_col(AAN_DE, "params", "#Params")] + _scores(AAN_DE, "En-De", ("bleu_tok", "meteor"))
_AAN_ROWS = [("transformer", "Transformer"), ("ssru", "SSRU"), ("linear_attention", "Linear Attention"),
             ("aan_plus_avg", "AAN+ w/ AVG"), ("aan_plus_far", "AAN+ w/ FAR"), ("aan_plus_ner", "AAN+ w/ NER"),
             ("aan_plus_wet", "AAN+ w/ WET")]
_AAN_NOTE = ("AAN+ paper: case-sensitive tokenized BLEU (multi-bleu.perl) and meteor-1.5 (-lower); ours: tokenized "
             "BLEU (the same) and nltk's METEOR (evaluation/meteor.py: not meteor-1.5, not comparable in absolute "
             "terms). No significance marks: the paper marks none. Speed ratios: ours from fairseq's own timings "
             "on the machine that ran each row (comparable only when all rows ran on one machine).")
_A6_ROWS = [("transformer", "Transformer Baseline"), ("avg", "AVG"), ("far", "FAR"), ("ner", "NER"), ("wet", "WET"),
            ("far_ner", "FAR + NER"), ("avg_ner", "AVG + NER"), ("ner_wet", "NER + WET"),
            ("far_ner_wet", "FAR + NER + WET"), ("avg_far_ner", "AVG + FAR + NER"),
            ("avg_far_ner_wet", "AVG + FAR + NER + WET")]

_G_SETS = [("iwslt16_en_de", "IWSLT16 En-De", False), ("iwslt16_de_en", "IWSLT16 De-En", False),
           ("iwslt17_en_ja", "IWSLT17 En-Ja", False), ("iwslt17_ja_en", "IWSLT17 Ja-En", False),
           ("wmt16_en_ro", "WMT16 En-Ro", True), ("wmt16_ro_en", "WMT16 Ro-En", False),
           (AAN_DE, "WMT14 En-De", True), ("wmt14_en_fr_epcc", "WMT14 En-Fr (Europarl + Common Crawl)", True)]
_IWSLT_STAND_IN = _col("iwslt14_de_en", "sacrebleu", "IWSLT14 De-En (ours, IWSLT size)")
_G2 = [_col(ds, "sacrebleu", label, ours=ours) for ds, label, ours in _G_SETS] + [_IWSLT_STAND_IN]
_G3 = [_col("wmt16_en_ro", "sacrebleu", "En-Ro BLEU"), _col("wmt16_en_ro", "sent_per_sec", "En-Ro sent/sec")]
_G7 = [_col("iwslt16_en_de", "sacrebleu", "IWSLT16 En-De BLEU", ours=False),
       _col("iwslt16_en_de", "sent_per_sec", "IWSLT16 En-De sent/sec", ours=False),
       _col("iwslt14_de_en", "sacrebleu", "IWSLT14 De-En BLEU (ours, IWSLT size)"),
       _col("iwslt14_de_en", "sent_per_sec", "IWSLT14 De-En sent/sec (ours)")]
_G5 = [_col("iwslt16_en_de", "sacrebleu", "En-De (IWSLT16)", ours=False), _col("wmt16_en_ro", "sacrebleu", "En-Ro"),
       _IWSLT_STAND_IN]
_G_SPEED_ROWS = [("base", "BASE"), ("hc_sa", "HC-SA"), ("sh_x", "SH-X"), ("base_nosa", "BASE/-SA"),
                 ("sh_x_nosa", "SH-X/-SA")]
_G_NOTE = "No significance marks: the paper marks none."
_G_SPEED_NOTE = ("sent/sec: ours from fairseq-generate's timing of one run (batches of 256) on the machine that ran "
                 "the row; the paper's is the mean of five runs on one RTX 2080 Ti.")
_G_LAYERS = range(1, 7)
_G_F3 = [(f"{key}_l{n}", f"{label}, {n} layer{'s' if n > 1 else ''}") for n in _G_LAYERS
         for key, label in (("base", "BASE"), ("base_ff", "BASE/-FF"), ("hc_sa", "HC-SA"), ("hc_sa_ff", "HC-SA/-FF"))]
_G_F7 = [("sh_x", "1 head (SH-X)")] + [(f"same_layer_{n}", f"{n} heads in the last layer") for n in (2, 3, 4)] + \
    [(f"across_layers_{n}", f"1 head in each of the last {n} layers") for n in (2, 3, 4)]
_A_F8 = [(f"{pattern}_{name}_{v}", f"{pattern.upper()}, {name} = {v}") for pattern, name in
         (("ner", "alpha"), ("far", "beta"), ("wet", "gamma")) for v in ("0.1", "0.2", "0.3", "0.4", "0.5")]
_A_F9 = [(f"{key}_enc{n}", f"{label}, {n} encoder layer{'s' if n > 1 else ''}") for n in range(1, 7)
         for key, label in _AAN_ROWS if key not in ("ssru", "linear_attention")]
_A_SCORES = _scores(AAN_DE, "En-De", ("bleu_tok", "meteor"))

TABLES: Dict[str, Table] = {
    "posnet-table2": Table(
        "PosNet paper, Table 2: base models on WMT14 En-De, WMT14 En-Fr and WMT18 En-Zh (newstest2017)",
        _T2, _POSNET_ROWS, marks=_POSNET_MARKS, notes=[_POSNET_NOTE]),
    "posnet-table3": Table(
        "PosNet paper, Table 3: big models on WMT14 En-De, small models on IWSLT14 De-En",
        _T3, _POSNET_ROWS, marks=_POSNET_MARKS, notes=[_POSNET_NOTE]),
    "posnet-table4": Table(
        "PosNet paper, Table 4: which attention layers use rPosNet (enc-self / dec-self / dec-cross), base, En-De",
        _T4, [("transformer", "✗ ✗ ✗"), ("enc", "✓ ✗ ✗"), ("dec", "✗ ✓ ✗"), ("cross", "✗ ✗ ✓"),
              ("enc_dec", "✓ ✓ ✗"), ("enc_cross", "✓ ✗ ✓"), ("dec_cross", "✗ ✓ ✓"), ("enc_dec_cross", "✓ ✓ ✓")],
        notes=["No significance marks: the paper marks none in this table."]),
    "posnet-table5": Table(
        "PosNet paper, Table 5: from LightConv to rPosNet, base, En-Zh (newstest2017)",
        _T5, [("light_convolution", "Light Convolution"), ("lightconv", "+ GLU [LightConv]"),
              ("lightconv_gelu", "+ GeLU Gating"), ("lightconv_global", "+ Global Context"), ("rposnet", "rPosNet")],
        notes=["No significance marks: the paper marks none in this table.",
               "Params: the paper counts rPosNet after folding its energies into tables (see Table 2's note)."]),
    "posnet-table6": Table(
        "PosNet paper, Table 6: attention with and without the GeLU gating, base, En-De",
        _T6, [("transformer", "Transformer ✗"), ("transformer_gated", "Transformer ✓"),
              ("shaw", "Shaw et al. (2018) ✗"), ("shaw_gated", "Shaw et al. (2018) ✓"),
              ("relattn", "Rel. Self-Attention ✗"), ("relattn_gated", "Rel. Self-Attention ✓"),
              ("aposnet_ungated", "aPosNet ✗"), ("aposnet", "aPosNet ✓"),
              ("rposnet_ungated", "rPosNet ✗"), ("rposnet", "rPosNet ✓")],
        notes=["No significance marks: the paper marks none in this table.", _POSNET_NOTE]),
    "aan-table2": Table(
        "AAN+ paper, Table 2: base models on WMT14 En-De (newstest2014)", _A2, _AAN_ROWS,
        reference={r: "transformer" for r, _ in _AAN_ROWS}, notes=[_AAN_NOTE]),
    "aan-table4": Table(
        "AAN+ paper, Table 4: deep (12 + 12 layers) and big models on WMT14 En-De (newstest2014)", _A4,
        [(f"{r}_{size}", f"{label} ({size})") for size in ("deep", "big") for r, label in _AAN_ROWS],
        reference={f"{r}_{size}": f"transformer_{size}" for size in ("deep", "big") for r, _ in _AAN_ROWS},
        notes=[_AAN_NOTE]),
    "aan-table5": Table(
        "AAN+ paper, Table 5: activations of the NER and WET scores, base, WMT14 En-De (newstest2014)", _A5,
        [("transformer", "Transformer"), ("ner_exp", "exp: AAN+ w/ NER"), ("wet_exp", "exp: AAN+ w/ WET"),
         ("ner_relu", "Relu: AAN+ w/ NER"), ("wet_relu", "Relu: AAN+ w/ WET †"),
         ("ner_square", "Square: AAN+ w/ NER"), ("wet_square", "Square: AAN+ w/ WET †")],
        notes=["†: trained with gradient-norm clipping at 1.0 (the paper's mark).", _AAN_NOTE]),
    "aan-table6": Table(
        "AAN+ paper, Table 6: combinations of patterns (each pattern's weighted average, mean-pooled before one "
        "shared gate), base, WMT14 En-De", _A4,
        _A6_ROWS, reference={r: "transformer" for r, _ in _A6_ROWS},
        notes=["The paper's text average-pools the patterns' outputs; its parameter counts (FAR + NER 72.30M, as one "
               "pattern; + WET only WET's U) leave room for one gate only, so the patterns' averages are pooled "
               "before a single gate (docs/conventions.md).", _AAN_NOTE]),
    "aan-table7": Table(
        "AAN+ paper, Table 7: base models on WMT14 En-Fr (newstest2014)", _A7, _AAN_ROWS,
        reference={r: "transformer" for r, _ in _AAN_ROWS}, notes=[_AAN_NOTE]),
    "gaussian-table2": Table(
        "Hard-coded Gaussian paper, Table 2: BASE / HC-SA / HC-ALL / SH-X (sacreBLEU, tok intl)", _G2,
        [("base", "BASE"), ("hc_sa", "HC-SA"), ("hc_all", "HC-ALL"), ("sh_x", "SH-X")],
        notes=[_G_NOTE,
               "IWSLT16/17 and WMT16 Ro-En: no data recipe here, the paper's figures only. IWSLT14 De-En is our "
               "stand-in at the paper's IWSLT model size (288/507/4 heads/5 layers); the paper has no such column.",
               "WMT14 En-Fr: trained on Europarl + Common Crawl only, as the paper (after Akoury et al., 2019)."]),
    "gaussian-table3": Table(
        "Hard-coded Gaussian paper, Table 3: decoding speed on WMT16 En-Ro, base size (sacreBLEU, tok intl)", _G3,
        _G_SPEED_ROWS,
        notes=[_G_NOTE, _G_SPEED_NOTE,
               "tokens/batch (the paper's third column: the largest training batch one GPU holds, a memory "
               "benchmark this recipe does not run): BASE 9.2K, HC-SA 10.8K, SH-X 11.7K, BASE/-SA 11.8K, "
               "SH-X/-SA 13.3K."]),
    "gaussian-table5": Table(
        "Hard-coded Gaussian paper, Table 5: three implementations of HC-SA (sacreBLEU, tok intl)", _G5,
        [("original", "Original"), ("conv", "Conv (window=3)"), ("index", "Indexing")],
        notes=[_G_NOTE, "IWSLT16 En-De: no data recipe here, the paper's figures only; IWSLT14 De-En at the IWSLT "
               "size is our stand-in. En-Ro: base size (the paper does not say)."]),
    "gaussian-table7": Table(
        "Hard-coded Gaussian paper, Table 7: decoding speed at the IWSLT size (sacreBLEU, tok intl)", _G7,
        _G_SPEED_ROWS,
        notes=[_G_NOTE, _G_SPEED_NOTE,
               "IWSLT16 En-De: no data recipe here, the paper's figures only (its dev set); IWSLT14 De-En is our "
               "stand-in.",
               "tokens/batch (the paper's third column, a memory benchmark this recipe does not run): BASE 14.1k, "
               "HC-SA 15.1k, SH-X 16k, BASE/-SA 16.1k, SH-X/-SA 17k."]),
    "gaussian-figure3": Table(
        "Hard-coded Gaussian paper, Figure 3: BLEU on WMT16 En-Ro with and without feed-forward layers, by depth",
        [_col("wmt16_en_ro", "sacrebleu", "En-Ro BLEU")], _G_F3,
        notes=["The figure's points are not in the text; it gives the gaps at 4 layers: BASE - BASE/-FF 1.8, "
               "HC-SA - HC-SA/-FF 3.2 BLEU."]),
    "gaussian-figure7": Table(
        "Hard-coded Gaussian paper, Figure 7: more learned cross heads, in one layer or across layers "
        "(WMT16 En-Ro, IWSLT size)", [_col("wmt16_en_ro", "sacrebleu", "En-Ro BLEU")], _G_F7,
        notes=["The figure's points are not in the text: heads spread over layers beat heads added to one layer."]),
    "aan-figure8": Table(
        "AAN+ paper, Figure 8: alpha (NER), beta (FAR) and gamma (WET) from 0.1 to 0.5, 100K updates, WMT14 En-De",
        _A_SCORES, _A_F8,
        notes=["The figure's points are not in the text; the paper scores newstest2013 (dev), ours newstest2014, "
               "and has no NER point at alpha = 0.4 and 0.5 (NaN in training).", _AAN_NOTE]),
    "aan-figure9": Table(
        "AAN+ paper, Figure 9: encoder depth, WMT14 En-De (newstest2014)", _A_SCORES, _A_F9,
        notes=["The paper plots BLEU minus the 6-layer Transformer's; its points are not in the text (decreasing "
               "the encoder to 1 layer costs ~0.65 more BLEU for AAN+ than for the Transformer, on average).",
               _AAN_NOTE]),
    "tisa-mt": Table(
        "TISA in machine translation (our experiment; the TISA paper evaluated on GLUE)",
        [_col(PN_DE, "params", "Base Params")] + _scores(PN_DE, "Base En-De", ("sacrebleu",)) +
        [_col("iwslt14_de_en", "params", "Small Params")] + _scores("iwslt14_de_en", "Small De-En", ("sacrebleu",)),
        [("transformer", "Transformer"), ("tisa_a", "TISA (a): beside position embeddings"),
         ("tisa_b", "TISA (b): instead of position embeddings"), ("tisa_s0", "S=0: no position information")],
        marks=[("transformer", "†")],
        notes=["No paper figures exist for this table. †: differs from the Transformer (paired bootstrap, p <= 0.05)."]),
}

# Every figure of the papers' tables, row by row in the columns' order ('.' where the paper has none).
PAPER: Dict[str, Dict[str, Dict[str, str]]] = {
    "posnet-table2": _paper(_T2, {
        "transformer": "66.5M 26.3 71.1 47.6 37.8 69.0 61.1 33.8 64.3 42.5",
        "shaw": "66.7M 26.3 71.4 48.6 37.8 69.2 61.6 34.0 64.6 43.5",
        "fouriernet": "63.4M 22.8†‡ 66.0†‡ 31.8†‡ 34.9†‡ 64.2†‡ 49.3†‡ 31.5†‡ 61.6†‡ 34.9†‡",
        "gaussiannet": "60.2M 25.3†‡ 68.1†‡ 39.5†‡ 36.7†‡ 66.9†‡ 55.7†‡ 32.6†‡ 62.6†‡ 36.8†‡",
        "linearnet": "61.8M 25.3†‡ 69.8†‡ 44.3†‡ 37.0†‡ 67.7†‡ 58.2†‡ 33.1†‡ 63.3†‡ 40.2†‡",
        "lightconv": "63.4M 26.0†‡ 70.6†‡ 46.7†‡ 37.4†‡ 68.6†‡ 60.3†‡ 33.0†‡ 63.5†‡ 41.1†‡",
        "glinearnet": "65.0M 26.1 70.8‡ 46.7‡ 37.8 69.1 61.3 33.5‡ 64.0‡ 42.4‡",
        "aposnet": "65.0M 25.9†‡ 70.6†‡ 46.1†‡ 37.7 69.0 61.4 33.6‡ 63.7‡ 42.2‡",
        "rposnet": "63.9M 26.6 71.4† 48.6 37.9 69.4† 61.8 33.8 64.2 43.1",
    }),
    "posnet-table3": _paper(_T3, {
        "transformer": "221M 27.1 72.3 50.4 36.8M 35.0 69.3 37.6",
        "shaw": "221M 27.3 72.7† 51.5† 37.0M 35.4† 69.7† 38.8†",
        "fouriernet": "208M 24.0†‡ 67.6†‡ 36.5†‡ 33.6M 32.5†‡ 66.9†‡ 28.2†‡",
        "gaussiannet": "196M 26.3†‡ 69.4†‡ 42.3†‡ 30.4M 34.3†‡ 68.4†‡ 34.1†‡",
        "linearnet": "199M 26.6†‡ 71.3†‡ 48.0†‡ 32.0M 34.0†‡ 68.3†‡ 33.9†‡",
        "lightconv": "209M 26.8†‡ 71.7†‡ 49.1†‡ 33.6M 34.4†‡ 68.9†‡ 35.5†‡",
        "glinearnet": "212M 27.1 72.2‡ 49.9‡ 35.2M 34.5†‡ 69.0†‡ 36.3†‡",
        "aposnet": "212M 26.8†‡ 71.4†‡ 47.7†‡ 35.2M 34.2†‡ 68.5†‡ 34.7†‡",
        "rposnet": "210M 27.3 72.2‡ 50.4‡ 34.1M 35.1‡ 69.5‡ 38.2‡",
    }),
    "posnet-table4": _paper(_T4, {
        "transformer": "26.3 71.1 47.6", "enc": "26.4 71.2 48.1", "dec": "26.1 71.1 47.2",
        "cross": "24.6 69.2 43.8", "enc_dec": "26.6 71.4 48.6", "enc_cross": "24.8 69.8 45.2",
        "dec_cross": "24.3 69.0 42.8", "enc_dec_cross": "24.9 69.3 43.5",
    }),
    "posnet-table5": _paper(_T5, {
        "light_convolution": "101M 33.2 63.4 40.6", "lightconv": "104M 33.0 63.5 41.1",
        "lightconv_gelu": "104M 33.5 63.7 42.4", "lightconv_global": "104M 33.6 63.9 42.4",
        "rposnet": "104M 33.8 64.2 43.1",
    }),
    "posnet-table6": _paper(_T6, {
        "transformer": "66.5M 26.3 71.1 47.6", "transformer_gated": "69.7M 26.6 71.6 49.6",
        "shaw": "66.7M 26.3 71.4 48.6", "shaw_gated": "69.9M 26.7 71.8 49.5",
        "relattn": "63.6M 25.7 70.4 46.4", "relattn_gated": "66.7M 26.5 71.3 49.0",
        "aposnet_ungated": "61.8M 25.4 69.4 42.6", "aposnet": "65.0M 25.9 70.6 46.1",
        "rposnet_ungated": "60.8M 25.3 70.1 45.1", "rposnet": "63.9M 26.6 71.4 48.6",
    }),
    "aan-table2": _paper(_A2, {
        "transformer": "72.31M 1.00x 1.00x 27.59 47.93", "ssru": "69.16M 0.85x 1.35x 27.55 47.56",
        "linear_attention": "72.31M 0.51x 0.22x 27.62 47.65", "aan_plus_avg": "72.30M 1.03x 1.32x 27.50 47.80",
        "aan_plus_far": "72.30M 1.02x 1.28x 27.35 47.73", "aan_plus_ner": "72.30M 1.02x 1.30x 27.56 47.81",
        "aan_plus_wet": "73.88M 0.97x 1.16x 27.49 48.01",
    }),
    "aan-table4": _paper(_A4, {
        "transformer_deep": "116.45M 1.00x 28.27 48.49", "ssru_deep": "110.14M 1.38x 27.87 48.06",
        "linear_attention_deep": "116.45M 0.19x 28.22 48.41", "aan_plus_avg_deep": "116.44M 1.40x 28.29 48.39",
        "aan_plus_far_deep": "116.44M 1.39x 28.17 48.35", "aan_plus_ner_deep": "116.44M 1.39x 28.35 48.29",
        "aan_plus_wet_deep": "119.59M 1.22x 28.31 48.21",
        "transformer_big": "232.70M 1.00x 29.09 48.95", "ssru_big": "220.10M 1.30x 28.63 48.65",
        "linear_attention_big": "232.70M 0.21x 28.85 48.86", "aan_plus_avg_big": "232.69M 1.30x 28.79 48.58",
        "aan_plus_far_big": "232.69M 1.29x 28.76 48.55", "aan_plus_ner_big": "232.69M 1.29x 28.94 48.77",
        "aan_plus_wet_big": "238.99M 1.38x 28.87 48.64",
    }),
    "aan-table5": _paper(_A5, {
        "transformer": "72.31M 27.59 47.93", "ner_exp": "72.30M 27.56 47.81", "wet_exp": "73.88M 27.49 48.01",
        "ner_relu": "72.30M 27.50 47.75", "wet_relu": "73.88M 17.38 37.88",
        "ner_square": "72.30M 27.35 47.64", "wet_square": "73.88M 27.54 47.78",
    }),
    "aan-table6": _paper(_A4, {
        "transformer": "72.31M 1.00x 27.59 47.93", "avg": "72.30M 1.24x 27.50 47.80",
        "far": "72.30M 1.16x 27.35 47.73", "ner": "72.30M 1.15x 27.56 47.81", "wet": "73.88M 1.13x 27.49 48.01",
        "far_ner": "72.30M 1.21x 27.71 47.92", "avg_ner": "72.30M 1.24x 27.34 47.81",
        "ner_wet": "73.88M 1.11x 27.77 47.89", "far_ner_wet": "73.88M 1.13x 27.27 47.65",
        "avg_far_ner": "72.30M 1.20x 27.46 47.76", "avg_far_ner_wet": "73.88M 1.10x 27.49 47.68",
    }),
    "aan-table7": _paper(_A7, {
        "transformer": "76.34M 1.00x 1.00x 39.09 60.58", "ssru": "73.18M 0.82x 1.33x 38.74 60.56",
        "linear_attention": "76.34M 0.51x 0.23x 39.40 60.95", "aan_plus_avg": "76.33M 1.03x 1.30x 38.61 60.46",
        "aan_plus_far": "76.33M 1.01x 1.30x 38.06 60.16", "aan_plus_ner": "76.33M 1.01x 1.31x 40.14 61.48",
        "aan_plus_wet": "77.90M 0.97x 1.19x 38.46 60.35",
    }),
    "gaussian-table2": _paper(_G2, {
        "base": "30.0 34.4 20.9 11.6 33.0 33.1 26.8 40.3 .",
        "hc_sa": "30.3 34.8 20.7 10.9 32.9 32.8 26.3 39.1 .",
        "hc_all": "21.1 25.7 10.6 6.1 25.5 26.2 21.7 35.6 .",
        "sh_x": "28.2 33.3 18.5 10.1 30.4 31.7 23.5 37.1 .",
    }),
    "gaussian-table3": _paper(_G3, {
        "base": "33.0 26.8", "hc_sa": "32.9 28.4", "sh_x": "30.3 34.9", "base_nosa": "27.0 30.1",
        "sh_x_nosa": "15.0 37.6",
    }),
    "gaussian-table5": _paper(_G5, {"original": "30.3 32.4 .", "conv": "30.1 32.3 .", "index": "29.8 31.4 ."}),
    "gaussian-table7": _paper(_G7, {
        "base": "30.0 43.1 . .", "hc_sa": "30.3 44.0 . .", "sh_x": "28.1 50.1 . .", "base_nosa": "22.8 46.1 . .",
        "sh_x_nosa": "14.9 54.9 . .",
    }),
}


def _load(results, row, col):
    path = os.path.join(results, row, col.dataset, col.split, "result.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cell(result, col, marks=(), reference=None):
    """Our figure for one column. ``marks`` [(baseline row, mark)] are appended where the paired bootstrap
    against that baseline found a difference (either direction, p <= 0.05); speed columns are ratios to
    ``reference`` (the reference row's result)."""
    if result is None or not col.ours:
        return "-"
    if col.metric in SPEED:
        key, field_name, inverse = SPEED[col.metric]
        if reference is None or key not in result or key not in reference:
            return "-"
        ours, theirs = result[key][field_name], reference[key][field_name]
        return f"{(theirs / ours if inverse else ours / theirs):.2f}x"
    if col.metric == "sent_per_sec":
        timing = result.get("decode_seconds")
        return f"{timing['sentences'] / timing['seconds']:.1f}" if timing else "-"
    if col.metric not in result:
        return "-"
    if col.metric == "params":
        return f"{result['params'] / 1e6:.2f}M"
    score = result[col.metric]
    if not score.get("available", True):
        return "n/a"
    text = f"{score['score'] * (100 if col.metric in SCALED else 1):.2f}"
    for baseline, mark in marks:
        sig = result.get("significance", {}).get(baseline, {}).get(col.metric)
        if sig and sig.get("significant"):
            text += mark
    return text


def collect(name, results):
    """(header, rows) of the table: each row is its label and, per column, ours then the paper's."""
    table = TABLES[name]
    paper = PAPER.get(name, {})
    header = ["Model"] + [h for col in table.columns for h in (f"{col.label} (ours)", f"{col.label} (paper)")]
    rows = []
    for key, label in table.rows:
        line = [label]
        for col in table.columns:
            ref_row = table.reference.get(key)
            reference = _load(results, ref_row, col) if ref_row else None
            line.append(cell(_load(results, key, col), col, table.marks, reference))
            line.append(paper.get(key, {}).get(col.key, ""))
        rows.append(line)
    return header, rows


def signatures(name, results):
    """One signature per column (the first result that has one), printed under the table."""
    table, found = TABLES[name], {}
    for col in table.columns:
        for key, _ in table.rows:
            result = _load(results, key, col)
            entry = result.get(col.metric) if result else None
            if isinstance(entry, dict) and "signature" in entry:
                found[col.label] = entry["signature"]
                break
    return found


def write(name, results, prefix):
    header, rows = collect(name, results)
    table = TABLES[name]
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    with open(prefix + ".csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header] + rows)
    lines = [f"## {table.title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    labels = dict(table.rows)
    for baseline, mark in table.marks:
        lines.append(f"`{mark}`: differs from {labels[baseline]} (paired bootstrap, 1000 resamples, p <= 0.05, "
                     "better or worse).")
    for label, sig in signatures(name, results).items():
        lines.append(f"- {label}: `{sig}`")
    lines += [f"- {note}" for note in table.notes]
    with open(prefix + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return prefix + ".md", prefix + ".csv"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect")
    col.add_argument("table", choices=sorted(TABLES))
    col.add_argument("--results", required=True)
    col.add_argument("--out", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    rows = sub.add_parser("rows")
    rows.add_argument("table", choices=sorted(TABLES))
    args = parser.parse_args(argv)
    if args.command == "rows":
        print(" ".join(key for key, _ in TABLES[args.table].rows))
        return 0
    md, csv_path = write(args.table, args.results, args.out)
    with open(md, encoding="utf-8") as f:
        print(f.read())
    print(f"wrote {md} and {csv_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
