"""posnet_fairseq/models/ds_init.py: DS-Init's initial weight ranges follow U(+-alpha sqrt(6/(d_in+d_out)) / sqrt(l))."""
import math

import pytest
import torch
from torch import nn

from fairseq_testing import build_model

# wide enough that a uniform sample's extremes come within 3% of the range's bounds
DIMS = ["--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4",
        "--encoder-layers", "4", "--decoder-embed-dim", "64", "--decoder-ffn-embed-dim", "128",
        "--decoder-attention-heads", "4", "--decoder-layers", "4"]


def _linears(model):
    """(stack, 1-based depth, name, nn.Linear) for every linear map inside the layers."""
    for stack in ("encoder", "decoder"):
        for depth, layer in enumerate(getattr(model, stack).layers, start=1):
            for name, module in layer.named_modules():
                if isinstance(module, nn.Linear):
                    yield stack, depth, name, module


@pytest.mark.parametrize("arch,alpha", [("posnet_transformer_tiny", 1.0), ("aan_plus_wet_tiny", 0.5),
                                        ("rposnet_transformer_tiny", 1.0)])
def test_every_layer_weight_matrix_has_the_depth_scaled_range(arch, alpha):
    model, _ = build_model(["--ds-init", "--ds-init-alpha", str(alpha)], arch=arch, dims=DIMS)
    seen = set()
    for stack, depth, name, linear in _linears(model):
        w = linear.weight.detach()
        limit = alpha * math.sqrt(6.0 / (linear.in_features + linear.out_features)) / math.sqrt(depth)
        assert w.abs().max().item() <= limit + 1e-7, (stack, depth, name)
        assert w.abs().max().item() >= 0.97 * limit, (stack, depth, name)  # the whole range is used
        # a uniform U(-b, b) has standard deviation b / sqrt(3)
        assert w.std().item() == pytest.approx(limit / math.sqrt(3), rel=0.08), (stack, depth, name)
        seen.add((stack, depth, name.split(".")[0]))
    # both stacks, every depth, the self-attention (here: any mixer), cross-attention and both FFN matrices
    for depth in range(1, 5):
        assert {("encoder", depth, "fc1"), ("encoder", depth, "fc2"), ("decoder", depth, "encoder_attn")} <= seen
        assert any(s == "decoder" and d == depth and n not in ("fc1", "fc2", "encoder_attn") for s, d, n in seen)


def test_off_by_default_and_other_parameters_untouched():
    plain, _ = build_model(arch="posnet_transformer_tiny", dims=DIMS, seed=3)
    scaled, _ = build_model(["--ds-init"], arch="posnet_transformer_tiny", dims=DIMS, seed=3)
    # without the flag, fairseq's initialisation (nn.Linear's U(+-1/sqrt(d_in)) for the FFN): wider than DS-Init's
    fc1 = plain.encoder.layers[3].fc1
    assert fc1.weight.abs().max().item() > 1.3 * math.sqrt(6.0 / (64 + 128)) / math.sqrt(4)
    layer_linears = {id(m.weight) for _, _, _, m in _linears(scaled)}
    for (name, p), (_, q) in zip(plain.named_parameters(), scaled.named_parameters()):
        if id(q) not in layer_linears:  # embeddings, biases, LayerNorms: the same draws with the same seed
            assert torch.equal(p, q), name


def test_bad_alpha_is_refused():
    with pytest.raises(ValueError, match=r"--ds-init-alpha 1.5: expected 0 < alpha <= 1"):
        build_model(["--ds-init", "--ds-init-alpha", "1.5"])
