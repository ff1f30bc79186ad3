"""The prepared datasets the paper tables read, and the check that a prepared one is the paper's.

    python posnet_fairseq/table_runs/datasets.py check --data-root DIR NAME...
    python posnet_fairseq/table_runs/datasets.py describe NAME...

Each preparation of a corpus has its own dataset name (the AAN+ paper's 32K-merge
WMT14 En-De is ``wmt14_en_de_bpe32k``, the PosNet authors' 40K-merge one with News
Commentary v12 ``wmt14_en_de_bpe40k``), and every table recipe names the dataset of its paper.
Before a table trains (its ``--check`` and its run), ``check`` reads each
dataset's ``stats.json`` (written by ``recipes/data/prepare-*.sh``) and refuses
one whose BPE merges, vocabulary or split sizes are not the paper's, naming the
command that prepares the right one. A dataset found only under the name used
before the split (``wmt14_en_de``, ``wmt14_en_fr``) is refused with the command
that renames it when its statistics fit, else with the preparing command.

Run as a file, not with ``-m``: importing the ``posnet_fairseq`` package loads
fairseq, which a dry run of a table does not need (this file imports nothing
from the package).
"""
import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Dataset:
    name: str
    prepare: str  # the command (from the repository root) that prepares it under data/NAME
    source: str  # where the expected values come from
    merges: Optional[int]  # joint subword-nmt merges (source side for separate vocabularies)
    test: Dict[str, int]  # split -> exact number of pairs (the official test sets)
    train_min: int  # fewest training pairs a full preparation keeps after cleaning
    vocab: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # language -> (min, max) dictionary size
    extra: Dict[str, str] = field(default_factory=dict)  # further stats.json fields and their values
    old_names: Tuple[str, ...] = ()  # where a preparation was written before the names were split

    def describe(self):
        bits = [f"joint BPE {self.merges} merges" if self.merges else None]
        bits += [f"{split} {n} pairs" for split, n in self.test.items()]
        bits.append(f"train >= {self.train_min} pairs")
        bits += [f"vocab {lang} {lo}-{hi}" for lang, (lo, hi) in self.vocab.items()]
        bits += [f"{k}={v}" for k, v in self.extra.items()]
        return f"{self.name}: " + ", ".join(b for b in bits if b) + f" ({self.source}); prepare: {self.prepare}"


def _range(paper, rel=0.1):
    """The paper's rounded vocabulary size (Table 1: '44k') as an interval of +-10%."""
    return int(paper * (1 - rel)), int(paper * (1 + rel))


_WMT14_TEST = {"test": 3003}  # newstest2014, full
DATASETS = {d.name: d for d in (
    Dataset("iwslt14_de_en", "bash recipes/data/prepare-iwslt14.sh",
            "PosNet Table 1: 10k joint vocabulary, 160k / 7283 / 6750 pairs", 10000,
            {"test": 6750, "valid": 7283}, 150_000, {"de": _range(10_000), "en": _range(10_000)}),
    Dataset("wmt14_en_de_bpe40k", "bash recipes/data/prepare-wmt14-en-de.sh --paper posnet",
            "PosNet Table 1: 44k joint vocabulary, 4M training pairs, newstest2014; 40000 merges and News "
            "Commentary v12: the authors' data/wmt14/en-de/prepare.bash", 40000,
            _WMT14_TEST, 3_600_000, {"en": _range(44_000), "de": _range(44_000)},
            {"corpora": "europarl-v7.de-en,commoncrawl.de-en,news-commentary-v12.de-en"}),
    Dataset("wmt14_en_de_bpe32k", "bash recipes/data/prepare-wmt14-en-de.sh --paper aan",
            "AAN+ section 6.1: BPE with 32K merges, 4.5M pairs (before cleaning), newstest2014", 32000,
            _WMT14_TEST, 3_600_000, old_names=("wmt14_en_de",)),
    Dataset("wmt14_en_fr_bpe40k", "bash recipes/data/prepare-wmt14-en-fr.sh --paper posnet",
            "PosNet Table 1: 46k joint vocabulary, 36M training pairs, newstest2014 (40000 merges: fairseq's)",
            40000, _WMT14_TEST, 32_000_000, {"en": _range(46_000), "fr": _range(46_000)},
            old_names=("wmt14_en_fr",)),
    Dataset("wmt14_en_fr_bpe32k", "bash recipes/data/prepare-wmt14-en-fr.sh --paper aan",
            "AAN+ section 6.1: BPE with 32K merges, 36M pairs (before cleaning), newstest2014", 32000,
            _WMT14_TEST, 32_000_000, old_names=("wmt14_en_fr",)),
    Dataset("wmt14_en_fr_epcc", "bash recipes/data/prepare-wmt14-en-fr.sh --paper gaussian",
            "hard-coded Gaussian footnote 10: Europarl + Common Crawl only (~5.2M pairs); 32000 merges: the "
            "authors' code (stupidNMT data/annotated.py, bpe.32000); ours, not the authors': valid = every 1,333th "
            "pair (3,939 of 5,251,875 before cleaning; theirs newstest2013, 3,000), Moses tokenisation and BPE "
            "learned on train (theirs spaCy, BPE on train+valid+test)", 32000, _WMT14_TEST, 4_000_000,
            extra={"corpora": "europarl-v7.fr-en,commoncrawl.fr-en"}),
    Dataset("wmt18_en_zh", "bash recipes/data/prepare-wmt18-en-zh.sh",
            "PosNet Table 1: vocabularies 32k (en) / 45k (zh), 17M training pairs, newstest2017 (2001)", 32000,
            {"test": 2001}, 15_000_000, {"en": _range(32_000), "zh": _range(45_000)}),
    Dataset("wmt16_en_ro_nodiacritics", "bash recipes/data/prepare-wmt16-en-ro.sh --paper gaussian",
            "hard-coded Gaussian Table 1: 612,422 training pairs, newstest2016 (1,999); Romanian without "
            "diacritics (footnote 13: Sennrich et al., 2016), replace-unicode-punctuation, English dev/test from "
            "*-roen-ref.en.sgm, only empty pairs dropped and 32000 merges: the authors' process_enro.sh/.py",
            32000, {"test": 1999}, 600_000,
            extra={"romanian_diacritics": "removed", "train_cleaning": "empty pairs only"}),
    Dataset("wmt16_en_ro", "bash recipes/data/prepare-wmt16-en-ro.sh",
            "WMT16 En-Ro with its Romanian diacritics (not the hard-coded Gaussian paper's preparation: "
            "wmt16_en_ro_nodiacritics), newstest2016 (1,999); 40000 merges (ours)", 40000, {"test": 1999}, 580_000),
)}


def merges_of(stats):
    """The joint BPE merges a stats.json records (``bpe_merges``; older files only say it in ``bpe``)."""
    if "bpe_merges" in stats:
        return int(stats["bpe_merges"])
    match = re.search(r"(\d+) merges", stats.get("bpe", "") + " " + stats.get("segmentation", ""))
    return int(match.group(1)) if match else None


def problems(dataset, stats):
    """What in ``stats`` (a stats.json) differs from ``dataset``'s paper values; empty when nothing."""
    found = []
    if "dataset" in stats and stats["dataset"] != dataset.name:
        found.append(f"it was prepared as {stats['dataset']}")
    merges = merges_of(stats)
    if dataset.merges is not None and merges != dataset.merges:
        found.append(f"BPE merges {merges}, expected {dataset.merges}")
    pairs = stats.get("pairs", {})
    for split, n in dataset.test.items():
        if pairs.get(split) != n:
            found.append(f"{split} has {pairs.get(split)} pairs, expected {n}")
    if pairs.get("train", 0) < dataset.train_min:
        found.append(f"train has {pairs.get('train')} pairs, expected at least {dataset.train_min}")
    for lang, (lo, hi) in dataset.vocab.items():
        size = stats.get("vocab", {}).get(lang)
        if size is None or not lo <= size <= hi:
            found.append(f"vocabulary {lang} {size}, expected {lo}-{hi}")
    for key, value in dataset.extra.items():
        if stats.get(key) != value:
            found.append(f"{key} {stats.get(key)!r}, expected {value!r}")
    return found


def _stats(path):
    with open(os.path.join(path, "stats.json"), encoding="utf-8") as f:
        return json.load(f)


def check(data_root, name):
    """None when DATA_ROOT/NAME is the paper's dataset, else why not and the command that fixes it."""
    dataset = DATASETS.get(name)
    if dataset is None:
        return f"{name}: no such dataset (known: {', '.join(sorted(DATASETS))})"
    where = os.path.join(data_root, name)
    prepare = f"{dataset.prepare} --out {where}"
    if os.path.exists(os.path.join(where, "stats.json")):
        bad = problems(dataset, _stats(where))
        if not bad:
            return None
        return (f"{where} is not the dataset of {dataset.source}: " + "; ".join(bad) +
                f". Prepare it with: {prepare}")
    for old in dataset.old_names:
        old_path = os.path.join(data_root, old)
        if os.path.exists(os.path.join(old_path, "stats.json")) and not problems(dataset, _stats(old_path)):
            return (f"{where} does not exist, but {old_path} (the name used before each preparation had its own) "
                    f"holds it: mv {old_path} {where}")
    return f"{where}: not prepared ({dataset.source}). Prepare it with: {prepare}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    chk = sub.add_parser("check", help="refuse datasets that are not their paper's")
    chk.add_argument("--data-root", required=True)
    chk.add_argument("names", nargs="+")
    desc = sub.add_parser("describe", help="one line per dataset: the paper's values and how to prepare it")
    desc.add_argument("names", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "describe":
        for name in args.names:
            if name not in DATASETS:
                parser.error(f"no dataset {name}")
            print(DATASETS[name].describe())
        return 0
    errors = [e for e in (check(args.data_root, n) for n in dict.fromkeys(args.names)) if e]
    for error in errors:
        print(f"datasets: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
