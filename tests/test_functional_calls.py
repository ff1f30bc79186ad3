"""functional_calls.py: torch's Linear and LayerNorm applied as functions give the module call's output, bit for
bit, with no module call; other modules are called."""
import torch
from torch import nn

from posnet_fairseq.mixers.functional_calls import linear, normalize
from posnet_fairseq.mixers.norms import AppTekLayerNorm


def _inputs():
    return torch.randn(3, 2, 16, generator=torch.Generator().manual_seed(0))


def test_torch_modules_are_applied_as_their_functions_bit_for_bit_without_a_module_call():
    torch.manual_seed(1)
    proj, norm = nn.Linear(16, 24), nn.LayerNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-1, 1)
    x = _inputs()
    calls = []
    for module in (proj, norm):
        module.register_forward_pre_hook(lambda module, args: calls.append(module))
    assert torch.equal(linear(proj, x), proj.forward(x))
    assert torch.equal(normalize(norm, x), norm.forward(x))
    assert calls == []  # (a module call would run the hooks)


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
