"""Checkpoints load with torch's safe loader kept on: fairseq's own classes are
allow-listed, and a pickle that would run code is refused."""
import argparse
import os
import pickle

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "args": _RunsCode(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"(?s)Weights only load failed.*unsupported GLOBAL posix.system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not marker.exists()


def test_fairseq_checkpoint_classes_load_safely(tmp_path):
    """What fairseq-train stores: a Namespace config and (with --eval-bleu) numpy meters."""
    path = tmp_path / "ok.pt"
    state = {
        "args": None,
        "cfg": {"model": argparse.Namespace(arch="posnet_transformer_tiny")},
        "model": {"w": torch.ones(2)},
        "extra_state": {"metrics": {"_bleu_counts": np.array([1, 2, 3, 4], dtype=np.int64),
                                    "x": np.array([0.5])}},
    }
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["cfg"]["model"].arch == "posnet_transformer_tiny"
    assert loaded["extra_state"]["metrics"]["_bleu_counts"].tolist() == [1, 2, 3, 4]
