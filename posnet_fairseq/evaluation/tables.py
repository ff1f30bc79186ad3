"""The papers' result tables: layouts, the papers' own numbers, and collection of our results into them.

    python -m posnet_fairseq.evaluation.tables collect TABLE --results DIR --out PREFIX
    python -m posnet_fairseq.evaluation.tables rows TABLE

``collect`` reads DIR/ROW/DATASET/SPLIT/result.json (written by
:mod:`.evaluate`) and writes PREFIX.md and PREFIX.csv: one line per row, for
every column our number beside the paper's. A ``*`` marks a difference to
the table's baseline row with paired-bootstrap p <= 0.05 (the PosNet paper's
convention). A cell we have no result for is ``-``.

The papers' numbers: only those written in the project's notes are filled in
(shared/notes/paper-facts.md: the PosNet Table 2/6 parameter counts). Every
other paper cell is left empty on purpose, never guessed: fill them in from
the paper PDF (``PAPER`` below) before comparing.
"""
import argparse
import csv
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass
class Column:
    key: str
    dataset: str
    split: str
    metric: str  # a key of result.json: sacrebleu, bleu_tok, bleu_compound_split, chrf, params
    label: str


@dataclass
class Table:
    title: str
    columns: List[Column]
    rows: List[Tuple[str, str]]  # (row key as in the recipe, label)
    baseline: Optional[str] = None
    notes: List[str] = field(default_factory=list)


def _bleu(dataset, metric, label, split="test"):
    return Column(f"{dataset}:{split}:{metric}", dataset, split, metric, label)


_NO_PAPER = "Paper columns are empty where the notes of this project do not give the number; copy them from the paper."
_BASE_PARAMS = ("Params: ours is the training-time count of unique parameters; the PosNet paper counts aPosNet/"
                "rPosNet after folding the position energies into N=128 tables (shared/notes/paper-facts.md).")

TABLES: Dict[str, Table] = {
    "posnet-table2": Table(
        "PosNet paper, Table 2: base models on WMT14 En-De, WMT14 En-Fr, WMT18 En-Zh",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         _bleu("wmt14_en_fr", "sacrebleu", "En-Fr sacreBLEU"),
         _bleu("wmt18_en_zh", "sacrebleu", "En-Zh sacreBLEU (zh, newstest2017)"),
         _bleu("wmt18_en_zh", "sacrebleu", "En-Zh sacreBLEU (zh, newstest2018)", split="test1"),
         Column("params", "wmt14_en_de", "test", "params", "Params")],
        [("transformer", "Transformer"), ("shaw", "Shaw et al. (2018)"), ("relattn", "Relative attention"),
         ("gaussiannet", "GaussianNet"), ("linearnet", "LinearNet"), ("glinearnet", "gLinearNet"),
         ("fouriernet", "FourierNet"), ("lightconv", "LightConv (AppTek)"), ("aposnet", "aPosNet"),
         ("rposnet", "rPosNet")],
        baseline="transformer", notes=[_BASE_PARAMS, _NO_PAPER]),
    "posnet-table3": Table(
        "PosNet paper, Table 3: big models on WMT14 En-De, small models on IWSLT14 De-En",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De big sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De big tok. BLEU"),
         _bleu("iwslt14_de_en", "bleu_tok", "De-En small tok. BLEU (lc)")],
        [("transformer", "Transformer"), ("shaw", "Shaw et al. (2018)"), ("relattn", "Relative attention"),
         ("aposnet", "aPosNet"), ("rposnet", "rPosNet")],
        baseline="transformer", notes=[_NO_PAPER]),
    "posnet-table4": Table(
        "PosNet paper, Table 4: where rPosNet replaces self-attention (base, WMT14 En-De)",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         Column("params", "wmt14_en_de", "test", "params", "Params")],
        [("transformer", "Transformer (no rPosNet)"), ("enc", "rPosNet in the encoder only"),
         ("dec", "rPosNet in the decoder self-attention only"), ("encdec", "rPosNet in encoder and decoder"),
         ("encdec_cross", "+ rPosNet cross attention"), ("lower", "rPosNet in the lower 3 layers"),
         ("upper", "rPosNet in the upper 3 layers")],
        baseline="transformer", notes=["Dataset assumed (the notes do not name it): WMT14 En-De base.", _NO_PAPER]),
    "posnet-table5": Table(
        "PosNet paper, Table 5: from LightConv to rPosNet (base, WMT14 En-De)",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         Column("params", "wmt14_en_de", "test", "params", "Params")],
        [("lightconv", "Light convolution"), ("lightconv_gated", "+ GeLU gating"),
         ("lightconv_global", "+ global context"), ("rposnet", "rPosNet")],
        baseline="lightconv", notes=["Dataset assumed (the notes do not name it): WMT14 En-De base.", _NO_PAPER]),
    "posnet-table6": Table(
        "PosNet paper, Table 6: gating ablation (base, WMT14 En-De)",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         Column("params", "wmt14_en_de", "test", "params", "Params")],
        [("transformer", "Transformer"), ("transformer_gated", "Transformer + gating"),
         ("linearnet", "LinearNet"), ("glinearnet", "gLinearNet"),
         ("aposnet_nogate", "aPosNet without gating"), ("aposnet", "aPosNet"),
         ("rposnet_nogate", "rPosNet without gating"), ("rposnet", "rPosNet")],
        baseline="transformer", notes=[_BASE_PARAMS, _NO_PAPER]),
    "aan-table2": Table(
        "AAN+ paper, Table 2: base models on WMT14 En-De",
        [_bleu("wmt14_en_de", "bleu_tok", "tok. BLEU"), _bleu("wmt14_en_de", "bleu_compound_split", "compound-split BLEU"),
         _bleu("wmt14_en_de", "sacrebleu", "sacreBLEU")],
        [("transformer", "Transformer"), ("aan", "AAN"), ("aan_plus_avg", "AAN+ AVG"),
         ("aan_plus_ner", "AAN+ NER"), ("aan_plus_far", "AAN+ FAR"), ("aan_plus_wet", "AAN+ WET")],
        baseline="transformer",
        notes=["Speed ratios of the paper's Table 2 are measured by the benchmarks, not by this recipe.", _NO_PAPER]),
    "aan-table4": Table(
        "AAN+ paper, Table 4: deep (12+12 layers) and big models on WMT14 En-De",
        [_bleu("wmt14_en_de", "bleu_tok", "tok. BLEU"), _bleu("wmt14_en_de", "sacrebleu", "sacreBLEU")],
        [(f"{name}_{size}", f"{label} {size}") for size in ("deep", "big") for name, label in
         (("transformer", "Transformer"), ("aan", "AAN"), ("aan_plus_avg", "AAN+ AVG"), ("aan_plus_ner", "AAN+ NER"),
          ("aan_plus_far", "AAN+ FAR"), ("aan_plus_wet", "AAN+ WET"))],
        notes=["Significance is not marked: deep and big rows have different baselines.", _NO_PAPER]),
    "aan-table6": Table(
        "AAN+ paper, Table 6: combinations of patterns (base, WMT14 En-De)",
        [_bleu("wmt14_en_de", "bleu_tok", "tok. BLEU"), _bleu("wmt14_en_de", "sacrebleu", "sacreBLEU")],
        [("aan_plus_avg", "AVG"), ("ner_far", "NER + FAR"), ("ner_wet", "NER + WET"), ("far_wet", "FAR + WET"),
         ("ner_far_wet", "NER + FAR + WET"), ("all", "AVG + NER + FAR + WET")],
        baseline="aan_plus_avg", notes=[_NO_PAPER]),
    "aan-table7": Table(
        "AAN+ paper, Table 7: base models on WMT14 En-Fr",
        [_bleu("wmt14_en_fr", "bleu_tok", "tok. BLEU"), _bleu("wmt14_en_fr", "sacrebleu", "sacreBLEU")],
        [("transformer", "Transformer"), ("aan", "AAN"), ("aan_plus_avg", "AAN+ AVG"),
         ("aan_plus_ner", "AAN+ NER"), ("aan_plus_far", "AAN+ FAR"), ("aan_plus_wet", "AAN+ WET")],
        baseline="transformer", notes=[_NO_PAPER]),
    "gaussian-table2": Table(
        "Hard-coded Gaussian paper, Table 2: BASE / HC-SA / HC-ALL / SH-X",
        [_bleu("wmt14_en_de", "sacrebleu", "WMT14 En-De sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         _bleu("wmt14_en_fr", "sacrebleu", "WMT14 En-Fr sacreBLEU"),
         _bleu("iwslt14_de_en", "bleu_tok", "IWSLT14 De-En tok. BLEU (lc)")],
        [("base", "BASE"), ("hc_sa", "HC-SA"), ("hc_all", "HC-ALL"), ("sh_x", "SH-X")],
        baseline="base",
        notes=["The paper's IWSLT set is IWSLT16 En-De; this recipe uses IWSLT14 De-En with the paper's IWSLT "
               "model size (288/507/4 heads/5 layers).", _NO_PAPER]),
    "tisa-mt": Table(
        "TISA in machine translation (our experiment; the TISA paper evaluated on GLUE)",
        [_bleu("wmt14_en_de", "sacrebleu", "En-De base sacreBLEU"), _bleu("wmt14_en_de", "bleu_tok", "En-De tok. BLEU"),
         _bleu("iwslt14_de_en", "bleu_tok", "De-En small tok. BLEU (lc)")],
        [("transformer", "Transformer"), ("tisa_a", "TISA (a): beside position embeddings"),
         ("tisa_b", "TISA (b): instead of position embeddings"), ("tisa_s0", "S=0: no position information")],
        baseline="transformer", notes=["No paper numbers exist for this table."]),
}

# The papers' numbers known to the project's notes (shared/notes/paper-facts.md), by table, row and column key.
PAPER: Dict[str, Dict[str, Dict[str, str]]] = {
    "posnet-table2": {
        "transformer": {"params": "66.5M"}, "shaw": {"params": "66.7M"}, "gaussiannet": {"params": "60.2M"},
        "linearnet": {"params": "61.8M"}, "glinearnet": {"params": "65.0M"}, "fouriernet": {"params": "63.4M"},
        "aposnet": {"params": "65.0M"}, "rposnet": {"params": "63.9M"},
    },
    "posnet-table6": {
        "transformer": {"params": "66.5M"}, "transformer_gated": {"params": "69.7M"},
        "linearnet": {"params": "61.8M"}, "glinearnet": {"params": "65.0M"},
        "aposnet": {"params": "65.0M"}, "rposnet": {"params": "63.9M"},
    },
}


def _load(results, row, col):
    path = os.path.join(results, row, col.dataset, col.split, "result.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cell(result, col, marks=(("", "*"),)):
    """Our number for one column; ``marks`` [(baseline row, mark)] are appended where the paired bootstrap
    against that baseline found a difference (either direction, p <= 0.05)."""
    if result is None or col.metric not in result:
        return "-"
    if col.metric == "params":
        return f"{result['params'] / 1e6:.1f}M"
    text = f"{result[col.metric]['score']:.2f}"
    key = col.metric if col.metric != "bleu_compound_split" else "bleu_tok"
    for baseline, mark in marks:
        sig = result.get("significance", {}).get(baseline, {}).get(key)
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
            line.append(cell(_load(results, key, col), col, [(table.baseline, "*")] if table.baseline else []))
            line.append(paper.get(key, {}).get(col.key, ""))
        rows.append(line)
    return header, rows


def signatures(name, results):
    """One signature per column (the first result that has one), printed under the table."""
    table, found = TABLES[name], {}
    for col in table.columns:
        for key, _ in table.rows:
            result = _load(results, key, col)
            if result and col.metric in result and isinstance(result[col.metric], dict):
                found[col.label] = result[col.metric]["signature"]
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
    if table.baseline:
        base = dict(table.rows)[table.baseline]
        lines.append(f"`*`: better than {base} with paired bootstrap p <= 0.05 (1000 resamples).")
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
