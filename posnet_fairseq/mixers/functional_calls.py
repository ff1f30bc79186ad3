"""torch's own Linear and LayerNorm applied as their functions on the modules' parameters (issue 48).

A decoding step on a GPU takes as long as the CPU needs to issue it, and a module call costs the CPU its
dispatch through ``nn.Module.__call__`` (the hook checks) on top of the function it ends in, per layer and step.
Where the module is exactly torch's class and has no hooks of its own, its call is that one function on its
parameters, which these call directly: the same kernel on the same tensors, so the output is the module call's,
bit for bit. Any other module (an int8 model's quantised Linear, ``models/int8.py``; the authors' LayerNorm,
``norms.AppTekLayerNorm``; the identity) or a module with hooks (``nn.utils.weight_norm`` recomputes its weight in
one) is called as a module. Global module hooks (``nn.modules.module.register_module_forward_hook``) are not run.
"""
import torch.nn.functional as F
from torch import Tensor, nn


def _plain(module: nn.Module, kind: type) -> bool:
    """Whether ``module`` is exactly torch's ``kind`` with no forward hooks of its own."""
    return type(module) is kind and not (module._forward_pre_hooks or module._forward_hooks)


def linear(proj: nn.Module, x: Tensor) -> Tensor:
    """``proj(x)``: ``F.linear`` on its weight and bias where ``proj`` is a plain ``nn.Linear``."""
    if _plain(proj, nn.Linear):
        return F.linear(x, proj.weight, proj.bias)
    return proj(x)


def normalize(norm: nn.Module, x: Tensor) -> Tensor:
    """``norm(x)``: ``F.layer_norm`` on its parameters where ``norm`` is a plain ``nn.LayerNorm``."""
    if _plain(norm, nn.LayerNorm):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    return norm(x)
