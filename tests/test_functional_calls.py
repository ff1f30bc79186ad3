"""functional_calls.py: torch's Linear and LayerNorm applied as functions give the module call's output, bit for
bit, with no module call; other modules, and modules with hooks, are called."""
from unittest import mock

import torch
from torch import nn

from posnet_fairseq.mixers.functional_calls import linear, normalize
from posnet_fairseq.mixers.norms import AppTekLayerNorm


def _inputs():
    return torch.randn(3, 2, 16, generator=torch.Generator().manual_seed(0))


def _modules():
    torch.manual_seed(1)
    proj, norm = nn.Linear(16, 24), nn.LayerNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-1, 1)
    return proj, norm


def test_torch_modules_are_applied_as_their_functions_bit_for_bit_without_a_module_call():
    proj, norm = _modules()
    x = _inputs()
    expected = proj(x), norm(x)
    with mock.patch.object(nn.Module, "__call__", side_effect=AssertionError("a module call")):
        assert torch.equal(linear(proj, x), expected[0])
        assert torch.equal(normalize(norm, x), expected[1])


def test_modules_with_hooks_are_called():
    proj, norm = _modules()
    x = _inputs()
    proj.register_forward_pre_hook(lambda module, args: (2 * args[0],))
    norm.register_forward_hook(lambda module, args, out: out + 1)
    assert torch.equal(linear(proj, x), proj.forward(2 * x))
    assert torch.equal(normalize(norm, x), norm.forward(x) + 1)


def test_other_modules_are_called():
    x = _inputs()
    apptek = AppTekLayerNorm(16)  # a subclass of nn.LayerNorm with its own forward (unbiased variance)
    assert torch.equal(normalize(apptek, x), apptek(x))
    assert not torch.allclose(normalize(apptek, x), nn.functional.layer_norm(x, (16,), eps=apptek.eps))
    quantized = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(16, 8)), {nn.Linear},
                                                       dtype=torch.qint8)[0]
    assert type(quantized) is not nn.Linear
    assert torch.equal(linear(quantized, x), quantized(x))
    assert torch.equal(normalize(nn.Identity(), x), x)
