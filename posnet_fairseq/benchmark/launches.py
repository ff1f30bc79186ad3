"""Which of a CPU profile's operators would launch a kernel on a GPU: the proxy of a step's CUDA kernel count.

A CUDA profile counts kernels, copies and fills; a CPU profile counts ``aten::`` operators, among them views and
allocations that launch nothing on a GPU, and the CPU's own decompositions of what CUDA runs as one kernel.
:func:`launching` keeps the innermost operators that launch: an operator whose callees launch counts as them
(``aten::linear`` as its ``aten::addmm``), one that launches nothing (a view, an allocation, a no-op cast or
``contiguous``) counts as none, and the CPU-only decompositions named here (dropout, an optimizer's multi-tensor
operators) count as the one kernel CUDA runs. How close it comes to an H100's kernel counts: docs/benchmarks.md,
"Launches: the GPU's kernels predicted on the CPU".
"""

# Operators that launch no kernel on a GPU: views and metadata changes (their result aliases their input),
# allocations (the caching allocator hands out memory without a kernel), and composites that do nothing when
# called as a no-op (``to`` to the dtype a tensor has, ``dropout`` in eval, ``contiguous`` of a contiguous
# tensor); where such a composite does work, the operators it calls are counted instead (dropout as the one
# kernel CUDA runs: ONE_KERNEL_ON_CUDA).
NO_KERNEL = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::unsqueeze", "aten::squeeze", "aten::permute", "aten::transpose",
    "aten::t", "aten::expand", "aten::as_strided", "aten::slice", "aten::select", "aten::alias", "aten::reshape",
    "aten::_reshape_alias", "aten::unflatten", "aten::flatten", "aten::detach", "aten::lift_fresh", "aten::empty",
    "aten::empty_strided", "aten::new_empty", "aten::resize_", "aten::set_", "aten::to", "aten::type_as",
    "aten::dropout", "aten::contiguous", "aten::split", "aten::unbind", "aten::narrow", "aten::expand_as",
    "aten::result_type", "aten::empty_like", "aten::view_as", "aten::broadcast_tensors", "aten::resolve_conj",
    "aten::resolve_neg", "aten::chunk", "aten::split_with_sizes", "aten::unsafe_split", "aten::diagonal",
    "aten::movedim", "aten::squeeze_", "aten::unsqueeze_", "aten::as_strided_", "aten::detach_",
    "aten::view_as_real", "aten::view_as_complex", "aten::_neg_view", "aten::_conj", "aten::conj",
})

# Reads of a tensor's value into Python (``if tensor:`` included): of the host tensors a step keeps there
# (lengths, step counters) no kernel; of a GPU tensor a copy and a sync, which the unit tests of single mixers
# count (``host_reads``).
HOST_READS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero"})

# Operators CUDA runs over a list of tensors in one kernel per chunk of them (multi_tensor_apply) and the CPU as
# one operator per tensor: each counts once, its per-tensor callees not.
MULTI_TENSOR = "aten::_foreach_"
# Composites the CPU runs as several operators and CUDA as one kernel, counted once where they launch at all:
# dropout in training (CUDA's fused native_dropout draws the mask and scales in one kernel; the CPU draws with
# bernoulli_, then divides and multiplies).
ONE_KERNEL_ON_CUDA = frozenset({"aten::dropout"})
# An optimizer's step (torch's record_function): on a GPU its step counters and bias corrections are host
# tensors and Python floats, so only its multi-tensor operators launch.
OPTIMIZER_STEP = "Optimizer.step#"


def launching(events, host_reads=False):
    """The names of the operators among the profiler's ``events`` that would launch a kernel on a GPU: the
    innermost ``aten::`` operators not in ``NO_KERNEL`` (an operator counts unless one it calls counts), each
    multi-tensor operator and each of ``ONE_KERNEL_ON_CUDA`` that launches once, inside an optimizer's step only
    the multi-tensor ones; scalar reads only with ``host_reads``."""
    skip = NO_KERNEL if host_reads else NO_KERNEL | HOST_READS
    names = []

    def visit(event, optimizer):
        if event.name.startswith(MULTI_TENSOR):
            names.append(event.name)
            return True
        optimizer = optimizer or event.name.startswith(OPTIMIZER_STEP)
        first = len(names)
        below = [visit(child, optimizer) for child in event.cpu_children]
        if any(below):
            if event.name in ONE_KERNEL_ON_CUDA:
                names[first:] = [event.name]
            return True
        if event.name.startswith("aten::") and event.name not in skip and not optimizer:
            names.append(event.name)
            return True
        return False

    for event in events:
        if event.cpu_parent is None:
            visit(event, False)
    return names
