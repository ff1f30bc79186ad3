"""Re-issues the verdicts of the saved three-seed Bible run (docs/compare/verdict-bible/run.tar.xz, no
checkpoints) with posnet_fairseq.compare.verdict, without retraining: docs/verdict-calibration.md.

    python docs/compare/verdict-bible-reissue.py [--write] SCRATCH_DIR

unpacks the run into SCRATCH_DIR (never under runs/), reads each model's translations (gen/*.out), the
test lengths and joined examples (steps/data.json) and the length buckets (quality.json), and prints the
Verdict section the report now writes, then every verdict whose outcome changed from the saved
quality.json's. With --write it also stores the re-issued verdicts in the run's quality.json, writes its
results.md anew from its records (the page's settings and its "Where decoding stopped" section, which needs
the data-bin, are kept as they were) and repacks the archive: the shipped run then carries the new test. The references are fairseq-generate's T- lines (the raw test file is not in the archive);
the script checks that they give the saved effects to 0.05 BLEU (SentencePiece's normalisation moves them
by a hair), so they score as the raw references did.
"""
import json
import os
import sys
import tarfile

from posnet_fairseq.compare import concatenated, quality, seeds, verdict
from posnet_fairseq.evaluation import generate_output

MOST_DRIFT = 0.05  # BLEU: how far the T- lines may move a saved effect (they move them by at most 0.016)
ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verdict-bible", "run.tar.xz")


def load(run):
    """(archs, seeds, {model: hypotheses}, refs, test lengths, joined lengths, saved quality.json)."""
    with open(os.path.join(run, "quality.json")) as f:
        saved = json.load(f)
    with open(os.path.join(run, "steps", "data.json")) as f:
        data = json.load(f)["result"]
    archs = [saved["baseline"], *saved["verdict"]]
    hyps, refs = {}, None
    for arch in archs:
        for seed in saved["seeds"]:
            model = seeds.key(arch, seed, saved["seeds"][0])
            output = generate_output.read(os.path.join(run, "gen", f"{model}.out"))
            total = data["test_sentences"] + data["concatenated"]["examples"]
            hyps[model] = output.ordered("hypotheses", total)
            refs = refs or output.ordered("references", total)
    return archs, saved["seeds"], hyps, refs, data, saved


def reissue(run):
    archs, seed_list, hyps, refs, data, saved = load(run)
    name = lambda arch, seed: seeds.key(arch, seed, seed_list[0])  # noqa: E731
    natural, limit = data["test_sentences"], saved["train_limit"]
    bleu = quality.metrics(False)[0]
    parts = concatenated.split_outputs({m: (h, []) for m, h in hyps.items()}, refs, refs, refs, natural)
    (outputs, nat_refs, _, _), (joined, joined_refs, _, _) = parts
    found = verdict.verdicts(bleu, archs, seed_list, {m: h for m, (h, _) in outputs.items()}, name, nat_refs,
                             verdict.by_length(data["test_lengths"], limit))
    beyond = verdict.by_length(data["concatenated"]["lengths"], limit)["beyond"]
    longer = verdict.verdicts(bleu, archs, seed_list, {m: h for m, (h, _) in joined.items()}, name, joined_refs,
                              {"joined": beyond})
    for arch, sides in longer.items():
        found[arch]["joined"] = sides["joined"]
    buckets = [(b["lo"], b["hi"], b.get("too_small", False)) for b in saved["buckets"] if not b.get("concatenated")]
    kept = verdict.kept(bleu, archs, seed_list, {m: h for m, (h, _) in outputs.items()}, name, nat_refs,
                        *verdict.kept_subsets(buckets, data["test_lengths"], limit))
    found, kept = verdict.corrected(found, kept)
    saved_verdicts = saved["verdict"]
    # The T- lines are the references after SentencePiece's normalisation: the effects move by a hair.
    drift = max(abs(entry["effect"] - saved["verdict"][arch][side]["effect"])
                for arch, sides in found.items() for side, entry in sides.items())
    assert drift < MOST_DRIFT, f"the T- lines score {drift:.4f} BLEU away from the raw references"
    reference = [b for b in buckets if not b[2] and b[0] <= limit][-1]
    print("\n".join(verdict.lines(found, kept, archs[0], seed_list, limit, saved["length_unit"],
                                  f"{reference[0]}-{reference[1]}")))
    print(f"## Changed\n\n(effects within {drift:.4f} BLEU of the saved ones)\n")
    for arch, sides in found.items():
        for side, entry in sides.items():
            before = saved_verdicts[arch][side]["verdict"]
            if before != entry["verdict"]:
                print(f"- `{arch}` {side}: {before} -> {entry['verdict']}")
    return found, kept


def write(run, found, kept):
    """The re-issued verdicts into the run's quality.json, its results.md made again from its records, and the
    archive and the shipped page replaced."""
    path = os.path.join(run, "quality.json")
    with open(path) as f:
        saved = json.load(f)
    saved["verdict"], saved["kept"] = found, kept
    with open(path, "w") as f:
        json.dump(saved, f, indent=1)
    page = _page(run, saved)
    for target in (os.path.join(run, "results.md"), os.path.join(os.path.dirname(ARCHIVE), "results.md")):
        with open(target, "w", encoding="utf-8") as f:
            f.write(page)
    with tarfile.open(ARCHIVE + ".tmp", "w:xz") as tar:
        tar.add(run, arcname="verdict-bible")
    os.replace(ARCHIVE + ".tmp", ARCHIVE)


def _page(run, saved):
    """results.md made from the run's records: the report's own code, with the page's settings lines and its
    "Where decoding stopped" section (made from the data-bin, not in the archive) as they were."""
    from posnet_fairseq.compare import records, report
    from posnet_fairseq.compare.records import TrainOutcome

    with open(os.path.join(run, "results.md"), encoding="utf-8") as f:
        page = f.read()
    with open(os.path.join(run, "cost.json")) as f:
        cost = records.Cost.read(json.load(f))
    steps = {}
    for entry in os.listdir(os.path.join(run, "steps")):
        with open(os.path.join(run, "steps", entry)) as f:
            steps[entry[:-len(".json")]] = json.load(f)
    outcomes = {n.split("--", 1)[1]: TrainOutcome(n.split("--", 1)[1], "checkpoint_avg.pt", **step["result"])
                for n, step in steps.items() if n.startswith("train--")}
    r2s = {n.split("--", 1)[1]: step["result"] for n, step in steps.items() if n.startswith("analysis--")}
    head = page.split("\n\n| model", 1)[0]
    context = dict(line[2:].split(": ", 1) for line in head.split("\n")[2:])
    seed_list = saved["seeds"]
    archs = [saved["baseline"], *saved["verdict"]]
    quality_record = records.Quality.read(saved)
    rows = report.rows(archs, outcomes, quality_record, cost, r2s, seed_list,
                       lambda arch, seed: seeds.key(arch, seed, seed_list[0]))
    made = report.markdown(rows, quality_record, cost, context, seed_list)
    made_before, made_verdict = made.split("## Verdict", 1)
    stopped = page.split("## Where decoding stopped", 1)[1].split("## Verdict", 1)[0]
    return made_before + "## Where decoding stopped" + stopped + "## Verdict" + made_verdict


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    writing = argv[:1] == ["--write"]
    argv = argv[1:] if writing else argv
    if len(argv) != 1:
        sys.exit("usage: python docs/compare/verdict-bible-reissue.py [--write] SCRATCH_DIR")
    scratch = os.path.abspath(argv[0])
    if "runs" in scratch.split(os.sep):
        sys.exit(f"SCRATCH_DIR {scratch}: give a scratch directory outside runs/")
    run = os.path.join(scratch, "verdict-bible")
    if not os.path.exists(os.path.join(run, "quality.json")):
        with tarfile.open(ARCHIVE) as tar:
            tar.extractall(scratch, filter="data")
    found, kept = reissue(run)
    if writing:
        write(run, found, kept)


if __name__ == "__main__":
    main()
