"""docs/figures.py: the figures the docs' prose quotes from a run are the run's saved figures (results.json
or results.csv, its verdicts from quality.json or results.md), on the compare guide and its reference page, the
length study's page, the verdict's calibration page and every shipped run's page; a figure changed in a run's
file is found; the run pages carry no absolute path of the machine they ran on and their links resolve."""
import importlib.util
import io
import json
import os
import re
import shutil
import tarfile

import pytest
from test_docs import github_anchors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
RUN_PAGES = ["compare/README.md", "compare/verdict-synthetic/README.md", "compare/verdict-bible/README.md",
             "compare/verdict-bible-seed1/README.md", "compare/t5-20-epochs/README.md", "compare/aa-bible/README.md",
             "length-study/remedies-bible/README.md"]
# the pages whose headline figures are rendered
PAGES = ["length-generalisation.md", "verdict-calibration.md", "compare.md", "compare-reference.md"] + RUN_PAGES


def _figures():
    spec = importlib.util.spec_from_file_location("figures", os.path.join(DOCS, "figures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(page):
    with open(os.path.join(DOCS, page)) as f:
        return f.read()


@pytest.mark.parametrize("page", PAGES)
def test_the_prose_quotes_the_runs_files(page):
    text = _read(page)
    assert _figures().FIGURE.search(text), f"docs/{page} has no rendered figure"
    assert _figures().render(text) == text, f"docs/{page}: a figure differs from its run; python docs/figures.py"


def test_a_figure_that_differs_from_its_file_is_rendered_and_a_missing_one_named():
    figures = _figures()
    marker = "<!-- figure length-study/bible-seed1 posnet_transformer_tiny+concat bleu_kept_49_96 .0f -->"
    assert figures.render(marker + "80<!-- /figure -->%") == marker + "77<!-- /figure -->%"
    with pytest.raises(ValueError, match="no 'nope' row"):
        figures.render(marker.replace("posnet_transformer_tiny+concat", "nope") + "1<!-- /figure -->")
    verdict = "<!-- figure compare/verdict-bible posnet_transformer_tiny verdict:beyond:effect +.2f -->"
    with pytest.raises(ValueError, match="no 'verdict:beyond:effect' for 'posnet_transformer_tiny'"):
        figures.render(verdict + "0<!-- /figure -->")  # the baseline has no verdict against itself


def test_a_joined_buckets_kept_figure_is_named_as_in_results_csv(tmp_path):
    """quality.json keys a joined bucket's kept tests by its label, which has a space a marker cannot hold."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "results.csv").write_text("arch,bleu\nm,1.0\n")
    entry = {"kept": {"effect": 81.25}, "against": {"verdict": "better"}, "sentences": 169, "within": 796}
    (run / "quality.json").write_text(json.dumps({"kept": {"m": {"\u22954 97-128": entry}}}))
    figures = _figures()
    assert figures.value("r", "m", "kept:concat4_97_128:effect", ".1f", root=str(tmp_path)) == "81.2"
    assert figures.value("r", "m", "against:concat4_97_128:verdict", "s", root=str(tmp_path)) == "better"
    assert figures.value("r", "m", "kept:concat4_97_128:sentences", ".0f", root=str(tmp_path)) == "169"
    with pytest.raises(ValueError, match="no 'kept:concat4_129_218:effect'"):
        figures.value("r", "m", "kept:concat4_129_218:effect", ".1f", root=str(tmp_path))


def _copy_runs(page, root):
    """The results files of every run ``page`` quotes, copied under ``root`` (a run's archive as it is)."""
    for run in {m.group(1) for m in _figures().FIGURE.finditer(_read(page))}:
        os.makedirs(os.path.join(root, run), exist_ok=True)
        for name in ("results.json", "results.csv", "results.md", "run.tar.xz"):
            if os.path.exists(os.path.join(DOCS, run, name)):
                shutil.copy(os.path.join(DOCS, run, name), os.path.join(root, run, name))


def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, f"{path} has no {old!r}"
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def _results_json(root):  # the synthetic verdict run's rPosNet BLEU, in its results.json
    path = os.path.join(root, "compare", "verdict-synthetic", "results.json")
    with open(path) as f:
        results = json.load(f)
    next(row for row in results["table"] if row["arch"] == "rposnet_transformer_tiny")["bleu"] += 1
    with open(path, "w") as f:
        json.dump(results, f)


def _results_csv(root):  # the 20-epoch run has no results.json: T5 bias's 11-20 BLEU in its results.csv
    _edit(os.path.join(root, "compare", "t5-20-epochs", "results.csv"), ",96.8743,", ",91.8743,")


def _report_verdict(root):  # seed 1 of the Bible run shipped no quality.json: its results.md's Verdict line
    path = os.path.join(root, "compare", "verdict-bible-seed1", "results.md")
    _edit(path, "beyond better (+6.6", "beyond better (+6.1")


def _archived_quality(root):  # the three-seed Bible run's verdicts: quality.json inside its run.tar.xz
    path = os.path.join(root, "compare", "verdict-bible", "run.tar.xz")
    with tarfile.open(path) as tar:
        quality = json.load(tar.extractfile("verdict-bible/quality.json"))
    quality["verdict"]["hc_gaussian_tiny"]["beyond"].update(verdict="no detectable difference", adjusted_p=0.5)
    data = json.dumps(quality).encode()
    with tarfile.open(path, "w:xz") as tar:
        member = tarfile.TarInfo("verdict-bible/quality.json")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))


@pytest.mark.parametrize("page,change", [
    ("compare/verdict-synthetic/README.md", _results_json), ("compare/t5-20-epochs/README.md", _results_csv),
    ("compare/verdict-bible-seed1/README.md", _report_verdict), ("compare/verdict-bible/README.md", _archived_quality),
    ("compare.md", _archived_quality)])
def test_a_figure_changed_in_its_runs_file_fails_the_page(tmp_path, page, change):
    text = _read(page)
    _copy_runs(page, str(tmp_path))
    assert _figures().render(text, root=str(tmp_path)) == text  # the copies render the page as it is
    change(str(tmp_path))
    assert _figures().render(text, root=str(tmp_path)) != text  # a fresh module: nothing read before the change


@pytest.mark.parametrize("page", RUN_PAGES)
def test_a_run_page_has_no_absolute_path_and_its_links_resolve(page):
    text, folder = _read(page), os.path.dirname(os.path.join(DOCS, page))
    assert not re.search(r"/work/|/root/|/home/", text), f"docs/{page} names a path of the machine it ran on"
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)):
        file_part, _, anchor = target.partition("#")
        linked = os.path.normpath(os.path.join(folder, file_part)) if file_part else os.path.join(DOCS, page)
        assert os.path.exists(linked), f"docs/{page} links {target}: {linked} does not exist"
        if anchor:
            with open(linked) as f:
                assert anchor in github_anchors(f.read()), f"docs/{page} links {target}: no such heading"
