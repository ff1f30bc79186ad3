"""Every shipped run (``docs/compare/*``, ``docs/length-study/*``) regenerates from its saved results.

A refactor of the report changes no output: for every shipped run, results.csv is made again from
results.json byte for byte, and each table of results.md (the main one, hypothesis / reference length,
BLEU kept) from results.json alone. The run whose whole record is shipped (``verdict-bible/run.tar.xz``)
gives its results.md from quality.json, cost.json and its step records, every line but two parts that
name what is not shipped: the settings at the top (the command line, the data's paths on the machine that
ran it) are read from the page, and "Where decoding stopped" needs the data-bin. The shipped page is that
page with its paths named as the report names them now (posnet_fairseq/compare/paths.py: the tarball keeps the
page as the run wrote it, with the absolute paths of its machine), and no shipped record names such a path.
"""
import glob
import json
import os
import re
import shlex
import tarfile

import pytest

from posnet_fairseq.compare import options, paths, records, report, seeds
from posnet_fairseq.compare.records import TrainOutcome

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = sorted(os.path.relpath(os.path.dirname(p), REPO)
                 for pattern in ("docs/compare/results.json", "docs/compare/*/results.json",
                                 "docs/length-study/*/results.json")
                 for p in glob.glob(os.path.join(REPO, pattern)))
WHOLE = os.path.join(REPO, "docs", "compare", "verdict-bible", "run.tar.xz")
# Pages written before the report had a table: the report of today adds it (from the same results.json).
# an absolute path where a word starts (not "src / tgt", not "tokens/s")
ABSOLUTE = re.compile(r"(?:^|[\s`'\"(=])(/[A-Za-z][^\s`'\"]*)")
PREDATES = {"docs/compare": ("## Length: hypothesis / reference", "## Beyond the training lengths: BLEU kept"),
            "docs/compare/verdict-synthetic": ("## Beyond the training lengths: BLEU kept",)}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _results(run):
    with open(os.path.join(REPO, run, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def _tables(text):
    """{the section's title: its markdown table, one string} of ``text`` (the main table's title: the page's)."""
    blocks, current, title = {}, [], None
    for line in text.split("\n") + [""]:
        if line.startswith("#"):
            title = line
        elif line.startswith("|"):
            current.append(line)
        elif current:
            blocks[title] = "\n".join(current)
            current = []
    return blocks


def _page_of(results):
    """results.md as the report writes it from results.json alone: the quality and cost records hold only
    what results.json keeps (the buckets, the training limit, the output lengths)."""
    buckets = records.Quality.read({"systems": {}, "buckets": results["buckets"]}).buckets
    quality = records.Quality({}, buckets, {}, results["train_limit"], None, "units", None)
    cost = records.Cost({}, {}, {}, {}, {"decode_lengths": results["decode_lengths"],
                                         "step_batch": 0, "step_length": 0, "step_rounds": 0, "timed_steps": 0,
                                         "decode_beam": 0, "decode_sentences": 0, "decode_batch": 0,
                                         "decode_rounds": 0})
    return report.markdown(results["table"], quality, cost, {}, results.get("seeds", [None]))


def test_every_shipped_run_is_found():
    assert len(SHIPPED) >= 10 and "docs/compare/verdict-bible" in SHIPPED


@pytest.mark.parametrize("run", SHIPPED)
def test_results_csv_regenerates_byte_for_byte(run, tmp_path):
    report.write_csv(tmp_path / "results.csv", _results(run)["table"])
    assert (tmp_path / "results.csv").read_bytes() == open(os.path.join(REPO, run, "results.csv"), "rb").read()


@pytest.mark.parametrize("run", SHIPPED)
def test_every_table_of_results_md_regenerates(run):
    made = _tables(_page_of(_results(run)))
    shipped = _tables(_read(os.path.join(REPO, run, "results.md")))
    assert len(made) >= 2  # the main table and the length ratios at least
    for title in PREDATES.get(run, ()):
        assert title not in shipped
        del made[title]
    made[next(iter(shipped))] = made.pop(next(iter(made)))  # the main table: titled by the number of models
    assert made == {title: shipped[title] for title in made}


def _whole_run(tmp_path):
    with tarfile.open(WHOLE) as tar:
        wanted = [m for m in tar.getmembers() if m.isfile() and m.name.split("/", 1)[1].split("/")[0]
                  in ("quality.json", "cost.json", "results.md", "results.json", "steps")]
        tar.extractall(tmp_path, members=wanted, filter="data")
    return tmp_path / "verdict-bible"


def test_the_whole_shipped_run_regenerates_its_results_md(tmp_path):
    out = _whole_run(tmp_path)
    page = (out / "results.md").read_text(encoding="utf-8")
    quality_json, cost_json = (json.loads((out / name).read_text()) for name in ("quality.json", "cost.json"))
    table = json.loads((out / "results.json").read_text())["table"]
    seed_list, archs = quality_json["seeds"], [row["arch"] for row in table]
    steps = {path.name[:-len(".json")]: json.loads(path.read_text()) for path in (out / "steps").iterdir()}
    outcomes = {name.split("--", 1)[1]: TrainOutcome(name.split("--", 1)[1], "checkpoint_avg.pt", **step["result"])
                for name, step in steps.items() if name.startswith("train--")}
    r2s = {name.split("--", 1)[1]: step["result"] for name, step in steps.items() if name.startswith("analysis--")}
    head, rest = page.split("\n\n| model", 1)
    context = dict(line[2:].split(": ", 1) for line in head.split("\n")[2:])

    def model_of(arch, seed):
        return seeds.key(arch, seed, seed_list[0])
    made_rows = report.rows(archs, outcomes, records.Quality.read(quality_json), records.Cost.read(cost_json), r2s,
                            seed_list, model_of)
    assert made_rows == [{k: v for k, v in row.items() if not k.startswith("stop_")} for row in table]
    made = report.markdown(made_rows, records.Quality.read(quality_json), records.Cost.read(cost_json), context,
                           seed_list)
    before, stopped = page.split("## Where decoding stopped", 1)
    assert made == before + "## Verdict" + stopped.split("## Verdict", 1)[1]


@pytest.mark.parametrize("run", SHIPPED)
def test_no_shipped_record_names_a_path_of_the_machine_it_ran_on(run):
    for name in ("results.md", "results.csv", "results.json"):
        assert ABSOLUTE.findall(_read(os.path.join(REPO, run, name))) == [], name


def test_the_whole_shipped_runs_page_is_its_own_with_portable_paths(tmp_path):
    written = (_whole_run(tmp_path) / "results.md").read_text(encoding="utf-8")
    assert ABSOLUTE.findall(written)  # the run wrote the paths of its machine
    lines = written.split("\n")
    argv = shlex.split(lines[2][len("- command: `posnet-compare "):-1])
    args = options.build_parser().parse_args(argv)
    given = [*args.raw, *args.raw_valid, *args.raw_test, args.out]
    lines[2] = f"- command: `posnet-compare {paths.command(argv, args.out)}`"
    lines[3] = "- data: " + paths.portable_text(lines[3][len("- data: "):], given, args.out)
    assert _read(os.path.join(REPO, "docs", "compare", "verdict-bible", "results.md")) == "\n".join(lines)
