"""docs/figures.py: the figures the docs' prose quotes from a run are the run's results.csv figures (the
length study's headline figures in docs/length-generalisation.md), and a figure that differs is found."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["length-generalisation.md"]  # the pages whose headline figures are rendered


def _figures():
    spec = importlib.util.spec_from_file_location("figures", os.path.join(REPO, "docs", "figures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", PAGES)
def test_the_prose_quotes_the_runs_files(page):
    with open(os.path.join(REPO, "docs", page)) as f:
        text = f.read()
    assert _figures().FIGURE.search(text), f"docs/{page} has no rendered figure"
    assert _figures().render(text) == text, f"docs/{page}: a figure differs from its run; python docs/figures.py"


def test_a_figure_that_differs_from_its_file_is_rendered_and_a_missing_one_named():
    figures = _figures()
    marker = "<!-- figure length-study/bible-seed1 posnet_transformer_tiny+concat bleu_kept_49_96 .0f -->"
    assert figures.render(marker + "80<!-- /figure -->%") == marker + "77<!-- /figure -->%"
    with pytest.raises(ValueError, match="no 'nope' row"):
        figures.render(marker.replace("posnet_transformer_tiny+concat", "nope") + "1<!-- /figure -->")
