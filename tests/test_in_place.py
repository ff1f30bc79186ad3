"""posnet_fairseq/cli/in_place.py: no tool overwrites one of its inputs unless told ``--in-place`` (issue 49
item 7: ``posnet-quantize X X`` replaced the 17 MB training checkpoint by its 2 MB int8 form, exit 0)."""
import os
import shutil

import pytest
import torch

from posnet_fairseq.cli import average_checkpoints, precompute, quantize, spm

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "regression")
DATA = ["--data", os.path.join(FIXTURE, "data-bin")]


def _refused(capsys, main, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code, capsys.readouterr().err


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "checkpoint_best.pt"
    shutil.copy(os.path.join(FIXTURE, "rposnet", "checkpoint.pt"), path)
    return path


@pytest.mark.parametrize("main,extra", [(quantize.main, []), (precompute.main, ["--max-length", "16"])])
def test_a_checkpoint_tool_refuses_to_write_over_its_input(tmp_path, capsys, checkpoint, main, extra):
    before = checkpoint.read_bytes()
    link = tmp_path / "link.pt"
    link.symlink_to(checkpoint)
    for output in (checkpoint, link):
        status, err = _refused(capsys, main, [str(checkpoint), str(output), *extra, *DATA])
        assert status == 2 and err.splitlines()[-1].endswith(
            f"error: the output {output} is the input {checkpoint}: it would be overwritten; write elsewhere, or "
            "give --in-place to replace it")
    assert checkpoint.read_bytes() == before


@pytest.mark.parametrize("main,extra", [(quantize.main, []), (precompute.main, ["--max-length", "16"])])
def test_in_place_replaces_the_input_whole(tmp_path, capsys, checkpoint, main, extra):
    before = torch.load(str(checkpoint), weights_only=False)["model"]
    main([str(checkpoint), str(checkpoint), "--in-place", *extra, *DATA])
    after = torch.load(str(checkpoint), weights_only=False)["model"]
    assert set(after) != set(before)  # rewritten: int8 packed weights, or PosNet tables in place of energies
    assert os.listdir(tmp_path) == ["checkpoint_best.pt"]  # no .tmp file left


def test_averaging_refuses_an_output_among_its_inputs(tmp_path, capsys):
    paths = []
    for n in (1, 2):
        paths.append(str(tmp_path / f"checkpoint_1_{n}.pt"))
        torch.save({"model": {"w": torch.tensor([float(n)])}, "optimizer_history": [{"num_updates": n}]}, paths[-1])
    status, err = _refused(capsys, average_checkpoints.main, ["--inputs", *paths, "--output", paths[1]])
    assert status == 2 and f"the output {paths[1]} is the input {paths[1]}" in err
    status, err = _refused(capsys, average_checkpoints.main,
                           ["--inputs", str(tmp_path), "--num-update-checkpoints", "2", "--output", paths[0]])
    assert status == 2 and f"the output {paths[0]} is the input {paths[0]}" in err
    average_checkpoints.main(["--inputs", *paths, "--output", paths[1], "--in-place"])
    assert torch.load(paths[1], weights_only=False)["model"]["w"].item() == 1.5


def test_spm_train_refuses_to_write_its_model_over_an_input(tmp_path, capsys):
    corpus = tmp_path / "spm.vocab"  # a text file that happens to be named as the model's vocabulary
    corpus.write_text("".join(f"word{i % 7} and more words {i}\n" for i in range(200)), encoding="utf-8")
    text = corpus.read_text(encoding="utf-8")
    status, err = _refused(capsys, spm.main, ["train", "--input", str(corpus), "--model-prefix",
                                              str(tmp_path / "spm"), "--vocab-size", "30"])
    assert status == 2 and f"the output {tmp_path / 'spm.vocab'} is the input {corpus}" in err
    assert corpus.read_text(encoding="utf-8") == text and not (tmp_path / "spm.model").exists()
    spm.main(["train", "--input", str(corpus), "--model-prefix", str(tmp_path / "spm"), "--vocab-size", "30",
              "--in-place"])
    assert sorted(os.listdir(tmp_path)) == ["spm.model", "spm.vocab"] and corpus.read_text() != text
