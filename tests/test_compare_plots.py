"""posnet_fairseq/compare/plots.py: the figures of a posnet-compare run, drawn from what results.json saves,
and readable with 20 or more models: the committed 23-model run of docs/compare is drawn again here.

The checks read the figure's structure (panels, rows, colours, the plotted numbers), not its pixels.
"""
import json
import os

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from posnet_fairseq.compare import plots

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "docs", "compare", "results.json")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def run():
    with open(RUN) as f:
        results = json.load(f)
    assert len(results["table"]) == 23  # the size these tests are about
    return results


def _key(bucket):
    return f"bleu_len_{bucket['lo']}_{bucket['hi']}"


def _cell_texts(ax):
    """The text written in each heat-map cell, by (row, column)."""
    return {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts
            if float(t.get_position()[1]).is_integer() and float(t.get_position()[0]).is_integer()}


@pytest.mark.parametrize("n", [1, 2, 10, 11, 20, 21, 23, 60, 61, 100])
def test_palette_never_repeats_a_colour(n):
    colours = plots.palette(n)
    assert len(colours) == n and len(set(colours)) == n


def test_bleu_vs_speed_gives_each_of_23_models_its_own_colour_and_number(run, tmp_path):
    table = run["table"]
    fig = plots.bleu_vs_speed(table, 30, table[0]["arch"], tmp_path / "s.png")
    ax = fig.axes[0]
    colours = [to_rgba(c.lines[0].get_color()) for c in ax.containers]
    assert len(colours) == 23 and len(set(colours)) == 23
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"{i + 1}  {r['arch']}" for i, r in enumerate(table)]
    points = [(c.lines[0].get_xdata()[0], c.lines[0].get_ydata()[0]) for c in ax.containers]
    assert points == [pytest.approx((r["decode_30_sentences_per_s"], r["bleu_mean"])) for r in table]
    assert sorted(int(t.get_text()) for t in ax.texts) == list(range(1, 24))  # the numbers beside the points
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG


def test_bleu_vs_speed_keeps_a_models_number_when_another_has_no_speed(tmp_path):
    table = [{"arch": a, "bleu": 20.0, "bleu_mean": 20.0 + i, "bleu_ci": 1.0, "decode_8_sentences_per_s": 5.0 + i}
             for i, a in enumerate("abc")]
    table[1]["decode_8_sentences_per_s"] = "beyond its 16 positions"
    ax = plots.bleu_vs_speed(table, 8, "a", tmp_path / "s.png").axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["1  a", "3  c"]
    assert [c.lines[0].get_xdata()[0] for c in ax.containers] == [5.0, 7.0]


def test_bleu_by_length_is_a_model_by_bucket_heat_map(run, tmp_path):
    table, buckets = run["table"], run["buckets"]
    archs = [row["arch"] for row in table]
    fig = plots.bleu_by_length(table, buckets, run["train_limit"], "words", tmp_path / "b.png")
    ax = fig.axes[0]  # fig.axes[1] is its colour bar
    assert [t.get_text() for t in ax.get_yticklabels()] == archs
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{b['lo']}-{b['hi']}\n({b['sentences']})" for b in buckets]
    # the colour: each model's BLEU minus the baseline's (the first model) on the same bucket
    gap = ax.images[0].get_array()
    assert gap.shape == (23, len(buckets))
    assert np.allclose(gap, [[row[_key(b)] - table[0][_key(b)] for b in buckets] for row in table])
    # the text: the score, starred where the paired bootstrap finds the difference significant
    cells = _cell_texts(ax)
    assert len(cells) == 23 * len(buckets)
    for r, row in enumerate(table):
        for c, b in enumerate(buckets):
            star = "*" if b["scores"][row["arch"]].get("direction") in ("better", "worse") else ""
            assert cells[r, c] == f"{row[_key(b)]:.1f}{star}"
    assert cells[0, 0] == "97.9" and cells[22, 1] == "24.7*"  # the baseline, and NoPE on 11-20 words
    # readable: a row of at least a quarter inch per model; the end of the training lengths between columns
    assert fig.get_size_inches()[1] / 23 >= 0.25
    first_beyond = next(c for c, b in enumerate(buckets) if b["lo"] > run["train_limit"])
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [first_beyond - 0.5]
    assert (tmp_path / "b.png").read_bytes()[:8] == PNG


def test_bleu_by_length_leaves_a_bucket_with_too_few_sentences_grey(tmp_path):
    buckets = [{"lo": 1, "hi": 10, "sentences": 50, "too_small": False, "scores": {"a": {"direction": None}}},
               {"lo": 11, "hi": 20, "sentences": 3, "too_small": True, "scores": {}}]
    table = [{"arch": "a", "bleu_len_1_10": 30.0, "bleu_len_11_20": "too few sentences (3)"}]
    ax = plots.bleu_by_length(table, buckets, 10, "pieces", tmp_path / "b.png").axes[0]
    assert list(np.ma.getmaskarray(ax.images[0].get_array())[0]) == [False, True]
    assert _cell_texts(ax) == {(0, 0): "30.0"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1-10\n(50)", "11-20\n(3, too few)"]


def test_valid_loss_is_one_panel_per_model_beside_the_baseline(run, tmp_path):
    curves = run["curves"]
    archs = [row["arch"] for row in run["table"]]
    fig = plots.valid_loss(archs, curves, tmp_path / "v.png")
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == archs
    assert panels[0].get_subplotspec().get_geometry()[:2] == (5, 5)  # 23 panels in 5 rows of 5
    assert len(fig.axes) - len(panels) == 2  # the two empty cells are switched off
    assert fig.get_size_inches()[0] / 5 >= 2.0  # each panel at least 2 inches wide
    for ax, arch in zip(panels, archs):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines[arch].get_ydata()) == [p[2] for p in curves[arch]]
        assert list(lines[arch].get_xdata()) == [p[0] for p in curves[arch]]
        assert set(lines) == ({arch} if arch == archs[0] else {arch, archs[0]})
        assert len({to_rgba(line.get_color()) for line in lines.values()}) == len(lines)
        last_update, seconds, loss = curves[arch][-1]
        assert f"{loss:.3f} after {seconds / 60:.1f} min" in [t.get_text() for t in ax.texts]


def test_position_mixing_is_a_model_by_offset_heat_map_per_side(run, tmp_path):
    mixing = run["mixing"]
    archs = [row["arch"] for row in run["table"]]
    fig = plots.position_mixing(archs, mixing, tmp_path / "m.png")
    heat = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title().split()[0] for ax in heat] == ["encoder", "decoder"]
    for ax, site in zip(heat, ("encoder", "decoder")):
        grid = ax.images[0].get_array()
        assert grid.shape == (23, 21)
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(k) for k in range(-10, 11)]
        silent = [t for t in ax.texts if t.get_text() == "no weights exposed"]
        for r, arch in enumerate(archs):
            profile = mixing[arch][site]
            if profile is None:
                assert np.ma.getmaskarray(grid)[r].all()
            else:
                assert np.allclose(grid[r], profile[1])
        assert len(silent) == sum(mixing[a][site] is None for a in archs)
    assert len(silent) == 7  # the decoder: the -SA ceiling, four AAN+, SSRU, linear attention
    assert fig.get_size_inches()[1] / 23 >= 0.25


def test_replot_draws_every_figure_from_results_json(run, tmp_path):
    paths = plots.replot(run, str(tmp_path / "plots"), "words")
    assert sorted(os.path.basename(p) for p in paths) == ["bleu_by_length.png", "bleu_vs_speed.png",
                                                         "position_mixing.png", "valid_loss.png"]
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == PNG


def test_the_command_takes_the_length_unit_from_quality_json_or_asks_for_it(run, tmp_path, capsys):
    small = dict(run, table=run["table"][:2], curves={a: run["curves"][a] for a in list(run["curves"])[:2]})
    (tmp_path / "results.json").write_text(json.dumps(small))
    with pytest.raises(SystemExit) as exc:
        plots.main([str(tmp_path / "results.json")])
    assert exc.value.code == 2
    assert f"--length-unit is needed: {tmp_path / 'quality.json'} does not exist" in capsys.readouterr().err
    (tmp_path / "quality.json").write_text(json.dumps({"length_unit": "pieces"}))
    assert plots.main([str(tmp_path / "results.json")]) == 0
    assert (tmp_path / "plots" / "bleu_by_length.png").exists()
