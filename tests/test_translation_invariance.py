"""Toeplitzness and TISA kernel analysis (posnet_fairseq.translation_invariance, posnet-analyze)."""
import os

import pytest
import torch
from fairseq import options

from fairseq_testing import PLUGIN_DIR, TINY_DIMS, build_model, run_cli, write_synthetic_data_bin
from posnet_fairseq import translation_invariance as ti
from posnet_fairseq.cli import analyze
from posnet_fairseq.mixers.tisa import TisaScorer

PNG = b"\x89PNG\r\n\x1a\n"


def test_toeplitz_fit_takes_the_mean_of_each_diagonal():
    matrix = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    fit = ti.toeplitz_fit(matrix)
    expected = torch.tensor([[16 / 3, 4.0, 3.0], [6.0, 16 / 3, 4.0], [7.0, 6.0, 16 / 3]])
    torch.testing.assert_close(fit, expected)


def test_sinusoidal_table_is_exactly_toeplitz():
    # sin(a) sin(b) + cos(a) cos(b) = cos(a - b): inner products depend on i - j only.
    gram = ti.position_gram(ti.sinusoidal_table(96, 32))
    assert ti.toeplitz_r2(gram) == pytest.approx(1.0, abs=1e-6)


def test_random_table_is_far_from_toeplitz():
    table = torch.randn(96, 32, generator=torch.Generator().manual_seed(0))
    assert ti.toeplitz_r2(ti.position_gram(table)) < 0.5


def test_learned_table_drops_the_padding_rows():
    weight = torch.randn(10 + 1 + 1, 4)  # max positions 10, padding_idx 1
    cfg = {"max_source_positions": 10, "max_target_positions": 10, "decoder_embed_dim": 8}
    tables = ti.position_tables({"encoder.embed_positions.weight": weight}, cfg)
    kind, table = tables["encoder.embed_positions"]
    assert kind == "learned" and torch.equal(table, weight[2:])
    # No learned decoder table: fairseq's sinusoidal one, rebuilt from the configuration.
    kind, table = tables["decoder.embed_positions"]
    assert kind == "sinusoidal" and table.shape == (10, 8)
    assert not ti.position_tables({}, {"no_token_positional_embeddings": True})


def test_kernel_profiles_read_every_scorer_of_a_model():
    model, _ = build_model(["--encoder-self-mixer", "tisa", "--decoder-self-mixer", "tisa,mha"])
    profiles = ti.kernel_profiles(model.state_dict(), max_distance=4)
    assert list(profiles) == ["encoder.layers.0.self_attn.position_bias", "encoder.layers.1.self_attn.position_bias",
                              "decoder.layers.0.self_attn.position_bias"]
    scorer = model.decoder.layers[0].self_attn.position_bias
    with torch.no_grad():
        torch.testing.assert_close(profiles["decoder.layers.0.self_attn.position_bias"],
                                   scorer.profile(torch.arange(-4, 5)))


def test_plots_are_written(tmp_path):
    scorer = TisaScorer(3, 5)
    with torch.no_grad():
        values = scorer.profile(torch.arange(-6, 7))
    profiles = {"encoder.layers.0.self_attn.tisa": values, "encoder.layers.1.self_attn.tisa": values,
                "decoder.layers.0.self_attn.tisa": values}
    ti.plot_kernels(profiles, str(tmp_path / "k.png"), max_distance=6)
    ti.plot_gram(ti.position_gram(torch.randn(16, 8)), str(tmp_path / "p.png"), "P")
    for name in ("k.png", "p.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """One update of a TISA model with a learned encoder and a sinusoidal decoder table."""
    from fairseq_cli import train

    root = tmp_path_factory.mktemp("analyze")
    data_bin = write_synthetic_data_bin(str(root), train=40, valid=8, test=8)
    save_dir = str(root / "checkpoints")
    run_cli(train.main, [
        data_bin, "--user-dir", PLUGIN_DIR, "--arch", "tisa_transformer_tiny", *TINY_DIMS,
        "--encoder-learned-pos", "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400",
        "--max-update", "1", "--save-dir", save_dir, "--no-progress-bar", "--num-workers", "0",
        "--no-epoch-checkpoints", "--disable-validation",
    ], options.get_training_parser)
    return os.path.join(save_dir, "checkpoint_last.pt")


def test_cli_reports_toeplitzness_and_plots_kernels(checkpoint, tmp_path, capsys):
    analyze.main([checkpoint, "--out-dir", str(tmp_path), "--max-positions", "64", "--max-distance", "8"])
    out = capsys.readouterr().out
    lines = {line.split(" (")[0]: line for line in out.splitlines() if "Toeplitz R^2" in line}
    assert "(learned, 64 x 16)" in lines["encoder.embed_positions"]
    # An untrained learned table is random, so far from Toeplitz; the sinusoidal one is exact.
    assert float(lines["encoder.embed_positions"].rsplit("= ", 1)[1]) < 0.5
    assert lines["decoder.embed_positions"].endswith("(sinusoidal, 64 x 16): Toeplitz R^2 = 1.0000")
    assert "decoder.layers.1.self_attn.position_bias: 2 heads" in out
    for name in ("encoder_position_gram.png", "decoder_position_gram.png", "tisa_kernels.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        analyze.main([str(tmp_path / "missing.pt")])
    assert "no checkpoint at" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        analyze.main([str(tmp_path / "missing.pt"), "--max-positions", "1"])
    assert "--max-positions 1" in capsys.readouterr().err


def test_decoder_peaks_are_taken_over_visible_distances():
    values = torch.tensor([[0.0, 1.0, 0.5, 3.0, 0.0]])  # k = -2..2, largest at k = 1
    assert ti.visible_peaks("encoder.layers.0.self_attn.tisa", values, 2).tolist() == [1]
    assert ti.visible_peaks("decoder.layers.0.self_attn.tisa", values, 2).tolist() == [-1]
