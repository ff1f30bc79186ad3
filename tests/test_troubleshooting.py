"""posnet_fairseq/troubleshooting.py: which errors fairseq raises with this plugin are said directly, and what
is said (the wrappers that print it: tests/test_fairseq_wrappers.py)."""
import argparse
import errno

import pytest
import torch

import fairseq_testing as ft
from posnet_fairseq import troubleshooting

SIZE = ("Size of sample #12 is invalid (=(np.int32(7), np.int32(9))) since max_positions=(8, 8), skip this "
        "example with --skip-invalid-size-inputs-valid-test")


@pytest.mark.parametrize("flags,message", [
    (["--encoder-self-mixer", "foo"], "--encoder-self-mixer foo: unknown mixer; choose from "),
    (["--encoder-self-mixer", "rposnet", "--posnet-max-relative", "-3"],
     "--posnet-max-relative -3: must be an integer >= 0"),
    (["--encoder-self-mixer", "hc_gaussian", "--hc-sigma", "-1"], "--hc-sigma -1.0: must be a positive number"),
    (["--decoder-self-mixer", "aan", "--aan-patterns", "zzz"], "--aan-patterns zzz: give a comma-separated list"),
    (["--encoder-self-mixer", "rope", "--rope-base", "0"], "--rope-base 0.0: must be greater than 1"),
    (["--encoder-self-mixer", "rposnet,mha,mha"], "--encoder-self-mixer rposnet,mha,mha: gives 3 per-layer values "
                                                  "but the model has 2 layers"),
    (["--cross-mixer", "aan"], "--cross-mixer aan: mixer 'aan' cannot serve the cross site"),
])
def test_a_refused_model_flag_is_recognised(flags, message):
    """Issue 27: the wrappers print these alone (exit status 2) instead of a traceback."""
    with pytest.raises(ValueError) as err:
        ft.build_model(flags)
    assert troubleshooting.flag_error(err.value) == str(err.value)
    assert str(err.value).startswith(message)


def test_other_errors_are_no_flag_errors():
    assert troubleshooting.flag_error(ValueError("embed_dim 7 is not divisible by the number of heads 2")) is None
    assert troubleshooting.flag_error(RuntimeError("--hc-sigma -1.0: must be a positive number")) is None


def _checkpoint(path, **model):
    torch.save({"model": {}, "cfg": {"model": argparse.Namespace(arch="rposnet_transformer_tiny", **model)}},
               str(path))
    return str(path)


def test_the_size_message_prints_plain_numbers_and_the_flag_that_helps_each_tool(tmp_path):
    """Issue 27: it printed np.int32(7), and told posnet-generate to raise --max-source-positions, which a
    trained model does not take."""
    train = troubleshooting.explain(Exception(SIZE))
    assert train.startswith("sentence #12 has (source, target) lengths (7, 9) but the model takes at most (8, 8) "
                            "positions: raise --max-source-positions")
    trained = _checkpoint(tmp_path / "trained.pt", posnet_precomputed=0)
    said = troubleshooting.explain(Exception(SIZE), "generate", ["--path", trained])
    assert "lengths (7, 9)" in said and "train with a larger --max-source-positions / --max-target-positions " \
                                       "(posnet-train)" in said
    precomputed = _checkpoint(tmp_path / "precomputed.pt", posnet_precomputed=8)
    said = troubleshooting.explain(Exception(SIZE), "generate", ["--path", precomputed])
    assert f"{precomputed} holds PosNet tables of 8 positions: run posnet-precompute again on the training " \
           "checkpoint with a larger --max-length" in said


def test_a_full_disk_names_the_directory(tmp_path):
    err = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "save" / "checkpoint_last.pt.tmp"))
    assert troubleshooting.explain(err).startswith(f"no space left on {tmp_path / 'save'}: free space there")
    bare = OSError(errno.ENOSPC, "No space left on device")  # raised on closing the file: no file name
    said = troubleshooting.explain(bare, "train", ["--save-dir", str(tmp_path / "ckpt")])
    assert said.startswith(f"no space left on {tmp_path / 'ckpt'}:")
    assert troubleshooting.explain(OSError(errno.EACCES, "Permission denied")) is None
