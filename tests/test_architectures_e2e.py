"""Every registered posnet architecture trains 2 updates with fairseq-train on the
synthetic corpus and translates with fairseq-generate (beam 4) from the saved
checkpoint, at tiny dimensions (the preset's mixers and flags, not its sizes)."""
import pytest
import torch
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_testing import train_and_generate, write_synthetic_data_bin
from posnet_fairseq.models.posnet_transformer import PosNetTransformerModel

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is PosNetTransformerModel)


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return write_synthetic_data_bin(str(tmp_path_factory.mktemp("synthetic")), train=120, valid=10, test=10)


@pytest.mark.parametrize("arch", ARCHS)
def test_train_and_generate(arch, data_bin, tmp_path):
    checkpoint, out = train_and_generate(data_bin, str(tmp_path / "ckpt"), arch)
    hypotheses = [line for line in out.splitlines() if line.startswith("H-")]
    assert len(hypotheses) == 10, out[-2000:]
    state = torch.load(checkpoint, weights_only=True)  # the safe loader, as fairseq-generate used it
    assert state["cfg"]["model"].arch == arch
