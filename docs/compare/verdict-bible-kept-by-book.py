"""Kept % of the saved three-seed Bible run (docs/compare/verdict-bible/run.tar.xz) balanced by book, with
posnet-compare's own code for --test-groups (posnet_fairseq/compare/test_groups.py), without retraining:
docs/length-generalisation.md, "Kept % by book".

    python docs/compare/verdict-bible-kept-by-book.py SCRATCH_DIR BIBLE_RAW_DIR

unpacks the run into SCRATCH_DIR (never under runs/) as docs/compare/verdict-bible-reissue.py does and
reads its translations with that script. BIBLE_RAW_DIR is raw/ of the corpus the run was made on
(recipes/data/prepare-bible-es-en.sh): its test.es must be the archive's test sources line for line (where
the run's SentencePiece model wrote <unk>, any characters), and its test.ref gives each test verse's book,
the part before the first dot (as the recipe's test.book). Writes docs/compare/verdict-bible/kept-by-book/:

* results.csv, one row per model: for each bucket beyond the training lengths, ``kept_BUCKET`` (as the run
  reported it, unbalanced) and ``balanced_kept_BUCKET`` (balanced by book), the mean over the seeds; for
  the natural buckets also the 95% interval (``_low``, ``_high``) and the verdict against the Transformer
  (``_verdict``), corrected by Holm's procedure over the run's family (its BLEU verdicts and these);
* groups.json: the books of the reference bucket and of each bucket beyond, and those left out.

The figures are the T- lines' (fairseq-generate's references, as the re-issue script scores them).
"""
import copy
import csv
import importlib.util
import json
import os
import re
import sys
import tarfile

from posnet_fairseq.compare import concatenated, quality, seeds, test_groups, verdict
from posnet_fairseq.data.text import read_lines
from posnet_fairseq.evaluation import generate_output

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "verdict-bible", "kept-by-book")
_spec = importlib.util.spec_from_file_location("reissue", os.path.join(HERE, "verdict-bible-reissue.py"))
reissue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reissue)


def check_sources(run, model, natural, test_es):
    """The run's test sources are ``test_es`` line for line (an <unk> standing for any characters)."""
    sources = generate_output.read(os.path.join(run, "gen", f"{model}.out")).ordered("sources", natural)
    given = read_lines(test_es)
    if len(given) != natural:
        sys.exit(f"{test_es}: {len(given)} lines, but the run has {natural} natural test sentences")
    for i, (source, line) in enumerate(zip(sources, given)):
        pattern = ".+".join(re.escape(part) for part in source.split("<unk>"))
        if not re.fullmatch(pattern, line):
            sys.exit(f"{test_es} line {i + 1} is not the run's test source: {source!r}")


def _kept(bleu, archs, seed_list, name, natural, within, beyond, weights, found):
    """verdict.kept, Holm-corrected with the run's BLEU verdicts ``found`` (the family results.md has)."""
    hyps, refs = natural[0], natural[1]
    kept = verdict.kept(bleu, archs, seed_list, hyps, name, refs, within, beyond, weights)
    return verdict.corrected(copy.deepcopy(found), kept)[1]


def _mean(values):
    return sum(values) / len(values) if values else None


def table(archs, seed_list, name, kept, balanced_kept, plain, balanced):
    """One row per arch: results.csv's columns (the module docstring)."""
    rows = []
    for arch in archs:
        row = {"arch": arch}
        for bucket, entry in plain["buckets"].items():
            models = [name(arch, s) for s in seed_list]
            row[f"kept_{bucket}"] = _mean([entry["kept"][m] for m in models if m in entry["kept"]])
            row[f"balanced_kept_{bucket}"] = _mean([balanced["buckets"][bucket]["kept"][m] for m in models
                                                    if m in balanced["buckets"][bucket]["kept"]])
        for prefix, tests in (("kept", kept), ("balanced_kept", balanced_kept)):
            for label, entry in tests[arch].items():
                bucket = label.replace("-", "_")
                row.update({f"{prefix}_{bucket}_low": entry["kept"]["low"],
                            f"{prefix}_{bucket}_high": entry["kept"]["high"],
                            f"{prefix}_{bucket}_verdict": entry["against"]["verdict"] if entry["against"] else ""})
        rows.append(row)
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.exit("usage: python docs/compare/verdict-bible-kept-by-book.py SCRATCH_DIR BIBLE_RAW_DIR")
    scratch, raw = os.path.abspath(argv[0]), argv[1]
    if "runs" in scratch.split(os.sep):
        sys.exit(f"SCRATCH_DIR {scratch}: give a scratch directory outside runs/")
    run = os.path.join(scratch, "verdict-bible")
    if not os.path.exists(os.path.join(run, "quality.json")):
        with tarfile.open(reissue.ARCHIVE) as tar:
            tar.extractall(scratch, filter="data")
    archs, seed_list, hyps, refs, data, saved = reissue.load(run)
    name = lambda arch, seed: seeds.key(arch, seed, seed_list[0])  # noqa: E731
    natural, limit, k = data["test_sentences"], saved["train_limit"], data["concatenated"]["k"]
    check_sources(run, name(archs[0], seed_list[0]), natural, os.path.join(raw, "test.es"))
    books = [ref.split(".")[0] for ref in read_lines(os.path.join(raw, "test.ref"))]
    (nat, nat_refs, _, _), (joined, joined_refs, _, _) = concatenated.split_outputs(
        {m: (h, []) for m, h in hyps.items()}, refs, refs, refs, natural)
    joined_books = test_groups.of_joined(books, nat_refs, joined_refs, k)
    bleu = quality.metrics(False)[0]
    buckets = [(b["lo"], b["hi"], b.get("too_small", False)) for b in saved["buckets"] if not b.get("concatenated")]
    within, beyond = verdict.kept_subsets(buckets, data["test_lengths"], limit)
    parts = ({m: h for m, (h, _) in nat.items()}, nat_refs), ({m: h for m, (h, _) in joined.items()}, joined_refs)
    kept = _kept(bleu, archs, seed_list, name, parts[0], within, beyond, None, saved["verdict"])
    balanced_kept = _kept(bleu, archs, seed_list, name, parts[0], within, *test_groups.balance(books, within, beyond),
                          saved["verdict"])

    def summary(nat_groups, joined_groups):
        return test_groups.summary(bleu, "test.book", within, (*parts[0], data["test_lengths"], nat_groups),
                                   (*parts[1], data["concatenated"]["lengths"], joined_groups), saved["buckets"])

    # one group for every sentence: weights of 1, the kept % as the run reported it
    plain, balanced = summary(["all"] * natural, ["all"] * len(joined_books)), summary(books, joined_books)
    rows = table(archs, seed_list, name, kept, balanced_kept, plain, balanced)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({key: f"{v:.6g}" if isinstance(v, float) else v for key, v in row.items()} for row in rows)
    reference = concatenated.bucket_label(*[b for b in buckets if not b[2] and b[0] <= limit][-1][:2])
    groups = {"file": "test.book (the book of each line of test.ref)", "reference": reference, "mix": balanced["mix"],
              "buckets": {b: {key: v for key, v in e.items() if key != "kept"} for b, e in balanced["buckets"].items()}}
    with open(os.path.join(OUT, "groups.json"), "w") as f:
        json.dump(groups, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(test_groups.note(balanced, groups["reference"]))


if __name__ == "__main__":
    main()
