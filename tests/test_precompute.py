"""Inference precomputation (PosNet paper, section 4): same outputs and translations before and
after, the checkpoint loads again, parameter counts before/after, the paper's Table 2/6
parameter deltas at base size, and the .npy export."""
import copy
import json
import os

import numpy as np
import pytest
import torch
from fairseq import options
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks.translation import TranslationTask

import fairseq_testing as ft
from posnet_fairseq import precompute
from posnet_fairseq.cli import precompute as precompute_cli

N = 24
GAMMA = ["--length-ratio", "1.25"]
MODELS = {
    "rposnet": ["--arch", "rposnet_transformer_tiny", "--cross-mixer", "rposnet"],
    "aposnet": ["--arch", "aposnet_transformer_tiny", "--cross-mixer", "aposnet"],
    "arposnet": ["--arch", "posnet_transformer_tiny", "--encoder-self-mixer", "arposnet",
                 "--decoder-self-mixer", "arposnet", "--encoder-learned-pos", "--decoder-learned-pos",
                 "--encoder-self-gating", "on", "--decoder-self-gating", "on"],
}


def build(flags, dims=ft.TINY_DIMS, seed=1, vocab=ft.VOCAB):
    """(args, task, model) from training flags, the model in eval mode."""
    args = ft.parse_train_args(["--dropout", "0", "--attention-dropout", "0", *dims, *GAMMA, *flags])
    dictionary = ft.dummy_dictionary(vocab)
    task = TranslationTask(args, dictionary, dictionary)
    torch.manual_seed(seed)
    return args, task, task.build_model(args).eval()


def precompute_and_reload(args, task, model, length=N):
    """Precomputes a copy of ``model`` and rebuilds it from the capped arguments, as a checkpoint load does."""
    folded, folded_args = copy.deepcopy(model), copy.deepcopy(args)
    precompute.precompute_model_(folded, length)
    state = precompute.capped_state_dict(folded, folded_args, length)
    reloaded = task.build_model(folded_args).eval()
    reloaded.load_state_dict(state, strict=True)
    return folded, reloaded


@pytest.mark.parametrize("name", sorted(MODELS))
def test_precomputed_model_gives_the_same_outputs_and_translations(name):
    args, task, model = build(MODELS[name])
    d = task.target_dictionary
    _, reloaded = precompute_and_reload(args, task, model)
    tokens, lengths, prev = ft.random_batch(d, [N - 1, 7, 12], [N - 1, 3, 9])  # N tokens with EOS
    with torch.no_grad():
        torch.testing.assert_close(reloaded(tokens, lengths, prev)[0], model(tokens, lengths, prev)[0],
                                   atol=1e-5, rtol=0)
        model.make_generation_fast_()  # the in-memory tables fairseq-generate uses
        sample_input = {"net_input": {"src_tokens": tokens, "src_lengths": lengths}}
        hyps = [SequenceGenerator([m], d, beam_size=4, max_len_b=N - 2)(sample_input) for m in (model, reloaded)]
    assert [len(h) for h in hyps] == [3, 3]  # one beam per sentence from each model
    for before, after in zip(*hyps):
        assert [h["tokens"].tolist() for h in before] == [h["tokens"].tolist() for h in after]
        torch.testing.assert_close(torch.stack([h["score"] for h in after]),
                                   torch.stack([h["score"] for h in before]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["rposnet", "aposnet"])
def test_precomputed_model_limits_lengths_to_the_tables(name):
    """fairseq refuses longer inputs up front (max_positions, which generation filters by); a
    mixer asked for more raises an error naming N. (rPosNet's learned position tables are cut to
    N rows, so there fairseq's embedding lookup is reached first: only the limit is checked.)"""
    args, task, model = build(MODELS[name])
    _, reloaded = precompute_and_reload(args, task, model)
    assert reloaded.max_positions() == (N, N)
    if name == "aposnet":
        tokens, lengths = ft.src_batch([[5] * N], task.source_dictionary.pad(), task.source_dictionary.eos())
        with pytest.raises(ValueError, match=f"precomputed for {N} positions"):
            reloaded.encoder(tokens, lengths)  # N + 1 tokens with EOS


def test_parameter_counts_before_and_after():
    """Per rPosNet layer: - W_q (D^2+D) - r ((2K+1) D) + the H x N x (2K+1) table; the shared position
    LayerNorms go; the learned position tables shrink to N rows (+ padding)."""
    args, task, model = build(MODELS["rposnet"])
    _, reloaded = precompute_and_reload(args, task, model)
    D, H, K, layers = 16, 2, 16, 6  # 2 encoder self, 2 decoder self, 2 cross
    per_layer = -(D * D + D) - (2 * K + 1) * D + H * N * (2 * K + 1)
    shrink = 2 * (args.max_source_positions - N) * D  # encoder and decoder position tables
    before, after = precompute.parameter_counts(model), precompute.parameter_counts(reloaded)
    assert after["attention"] - before["attention"] == layers * per_layer - 2 * 2 * D
    assert after["model"] - before["model"] == layers * per_layer - 2 * 2 * D - shrink


def test_a_precomputed_checkpoint_of_the_layout_before_the_energy_terms_loads():
    """Checkpoints written before the energy terms were modules held the tables on the mixer
    (``rel_energy``, ``abs_energy``): they load into the terms (``relative.table``, ``absolute.table``)."""
    args, task, model = build(MODELS["arposnet"])
    folded = copy.deepcopy(model)
    precompute.precompute_model_(folded, N)
    state = precompute.capped_state_dict(folded, args, N)
    old = {key.replace("relative.table", "rel_energy").replace("absolute.table", "abs_energy"): value
           for key, value in state.items()}
    assert sum(key.endswith(("rel_energy", "abs_energy")) for key in old) == 2 * 4
    reloaded = task.build_model(args).eval()
    with pytest.warns(UserWarning, match="--reset-optimizer"):  # the optimizer state's order does not carry over
        reloaded.load_state_dict(old, strict=True)
    tokens, lengths, prev = ft.random_batch(task.target_dictionary, [N - 1, 7], [N - 1, 3])
    with torch.no_grad():
        assert torch.equal(reloaded(tokens, lengths, prev)[0], folded(tokens, lengths, prev)[0])


BASE_VOCAB = 1000  # the deltas do not depend on the vocabulary
PAPER_TRANSFORMER_BASE = 66.5e6


def test_base_parameter_deltas_match_the_paper():
    """Table 2/6 (base, N = 128): Transformer 66.5M, +gating 69.7M, rPosNet 63.9M, aPosNet 65.0M,
    the PosNet rows counted after precomputation (see docs/posnet.md, "Inference precomputation")."""
    counts = {}
    for row, flags in {
        "transformer": ["--arch", "posnet_transformer_base"],
        "gating": ["--arch", "posnet_transformer_base", "--encoder-self-gating", "on", "--decoder-self-gating", "on"],
        "rposnet": ["--arch", "rposnet_transformer_base"],
        "aposnet": ["--arch", "aposnet_transformer_base"],
    }.items():
        args, task, model = build(flags, dims=[], vocab=BASE_VOCAB)
        counts[row] = sum(p.numel() for p in model.parameters())
        if row in ("rposnet", "aposnet"):
            _, reloaded = precompute_and_reload(args, task, model, length=128)
            counts[row + "_precomputed"] = sum(p.numel() for p in reloaded.parameters())
        del model
    D, H, layers, linear = 512, 8, 12, 512 * 512 + 512
    assert counts["gating"] - counts["transformer"] == layers * (linear + 2 * D)
    # Training time: rPosNet has no W_k but a 33 x D table, a shared position LayerNorm per side
    # and learned position tables (1026 rows each at fairseq's 1024 positions).
    assert counts["rposnet"] - counts["gating"] == layers * (33 * D - linear) + 2 * 2 * D + 2 * 1026 * D
    assert counts["aposnet"] == counts["gating"]
    paper = {"gating": 69.7e6, "rposnet_precomputed": 63.9e6, "aposnet_precomputed": 65.0e6}
    for row, expected in paper.items():
        delta = counts[row] - counts["transformer"]
        # Both paper figures are rounded to 0.1M.
        assert abs(PAPER_TRANSFORMER_BASE + delta - expected) <= 0.1e6, (row, delta)
    assert counts["rposnet_precomputed"] - counts["transformer"] == \
        layers * (H * 128 * 33 - linear + D * 2) + 2 * 130 * D
    assert counts["aposnet_precomputed"] - counts["transformer"] == layers * (H * 128 * 128 - linear + D * 2)


def test_export_npy(tmp_path):
    args, task, model = build(MODELS["arposnet"])
    folded, _ = precompute_and_reload(args, task, model)
    index = precompute.export_npy(folded, str(tmp_path))
    assert len(index) == 2 * 4  # a and r tables in 2 encoder + 2 decoder layers
    for filename, entry in index.items():
        table = np.load(tmp_path / filename)
        assert list(table.shape) == entry["shape"]
        assert table.shape[:2] == (2, N) and table.shape[2] == (33 if "rel" in filename else N)
    assert json.loads((tmp_path / "index.json").read_text()) == index


def test_cli_writes_a_checkpoint_that_fairseq_generate_translates_identically(tmp_path, capsys):
    from fairseq_cli import generate, train

    data = ft.write_synthetic_data_bin(str(tmp_path), train=60, valid=8, test=8)
    save = str(tmp_path / "ckpt")
    ft.run_cli(train.main, [
        data, "--user-dir", ft.PLUGIN_DIR, "--arch", "rposnet_transformer_tiny", *ft.TINY_DIMS,
        "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400", "--max-update", "2", "--save-dir", save,
        "--no-progress-bar", "--num-workers", "0", "--seed", "1", "--no-epoch-checkpoints", "--disable-validation",
    ], options.get_training_parser)
    trained, folded = os.path.join(save, "checkpoint_last.pt"), os.path.join(save, "precomputed.pt")
    precompute_cli.main([trained, folded, "--max-length", "64", "--export-npy", str(tmp_path / "npy")])
    report = capsys.readouterr().out
    assert "precomputed 4 PosNet mixers for N = 64" in report
    assert "max |logit difference| between the checkpoints on random batches: 0" in report
    assert len(os.listdir(tmp_path / "npy")) == 4 + 1

    def translations(path):
        out = ft.run_cli(generate.main, [
            data, "--user-dir", ft.PLUGIN_DIR, "--path", path, "--beam", "4", "--batch-size", "8",
            "--gen-subset", "test", "--max-len-b", "20", "--num-workers", "0",
        ], options.get_generation_parser)
        return sorted(line for line in out.splitlines() if line.startswith(("H-", "P-")))

    before = translations(trained)
    assert len(before) == 2 * 8
    assert translations(folded) == before


FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "regression")


def _cli_refusal(capsys, argv):
    """posnet-precompute ARGV's exit status and stderr; it must exit."""
    with pytest.raises(SystemExit) as exit_:
        precompute_cli.main(argv)
    code, err = exit_.value.code, capsys.readouterr().err
    return (1, err + code + "\n") if isinstance(code, str) else (code, err)  # sys.exit(message) prints it


def test_cli_says_a_missing_or_non_checkpoint_file_in_one_line(tmp_path, capsys):
    """Issue 27: a text file gave 'IndexError: pop from empty list', a truncated copy 'OSError 22'."""
    text = tmp_path / "dict.txt"
    text.write_text("a 1\nb 2\n")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(open(os.path.join(FIXTURE, "rposnet", "checkpoint.pt"), "rb").read()[:20000])
    weights = tmp_path / "weights.pt"
    torch.save({"model": {"w": torch.zeros(2)}}, str(weights))
    for path, said in [(tmp_path / "missing.pt", "no such checkpoint file"),
                       (tmp_path, "is a directory, not a checkpoint file"),
                       (text, "is not a complete checkpoint"), (truncated, "is not a complete checkpoint"),
                       (weights, "stores no model configuration")]:
        status, err = _cli_refusal(capsys, [str(path), str(tmp_path / "out.pt")])
        assert status == 1 and "Traceback" not in err and err.count("\n") == 1, err
        assert f"posnet-precompute: {path}" in err and said in err
    assert not os.path.exists(tmp_path / "out.pt")


def _stopping_torch_save(monkeypatch, stop):
    def save(obj, f, *args, **kwargs):
        f.write(b"partial")
        f.flush()
        stop()
    monkeypatch.setattr(torch, "save", save)


def test_cli_says_a_full_disk_and_leaves_no_tmp_file(tmp_path, capsys, monkeypatch):
    import errno

    out = tmp_path / "out"
    out.mkdir()

    def full():
        raise OSError(errno.ENOSPC, "No space left on device")
    _stopping_torch_save(monkeypatch, full)
    status, err = _cli_refusal(capsys, [os.path.join(FIXTURE, "rposnet", "checkpoint.pt"), str(out / "p.pt"),
                                        "--max-length", "16", "--data", os.path.join(FIXTURE, "data-bin")])
    assert status == 1 and f"posnet-precompute: no space left on {out} (writing p.pt, removed again)" in err
    assert os.listdir(out) == []


def test_cli_interrupted_exits_143_and_leaves_no_tmp_file(tmp_path, capsys, monkeypatch):
    import signal

    out = tmp_path / "out"
    out.mkdir()
    _stopping_torch_save(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    status, err = _cli_refusal(capsys, [os.path.join(FIXTURE, "rposnet", "checkpoint.pt"), str(out / "p.pt"),
                                        "--max-length", "16", "--data", os.path.join(FIXTURE, "data-bin")])
    assert (status, err.splitlines()[-1]) == (143, "posnet-precompute: interrupted")
    assert os.listdir(out) == []
