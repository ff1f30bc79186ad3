"""posnet_fairseq.benchmark.op_counts: operators per decoding and training step, from torch.profiler.

The counts are checked on real CPU runs of tiny models; the CUDA count (kernels) with a profiler whose
events are given, as no GPU is needed to check what is counted."""
import contextlib
import io
import types

import pytest
import torch

from posnet_fairseq.benchmark import op_counts

TINY = ["--size", "tiny", "--vocab", "64", "--batch-size", "2", "--train-batch", "2", "--train-length", "8",
        "--source-length", "8", "--step", "4"]


def _args(*extra):
    return op_counts.parse_args([*TINY, *extra])


def test_counts_are_deterministic():
    args = _args()
    first = [op_counts.decoding_step_ops("posnet_transformer_tiny", args),
             op_counts.training_step_ops("posnet_transformer_tiny", args)]
    second = [op_counts.decoding_step_ops("posnet_transformer_tiny", args),
              op_counts.training_step_ops("posnet_transformer_tiny", args)]
    assert first == second
    assert all(n > 0 for n in first)


def test_relative_position_terms_add_operators_in_training_and_folded_ones_save_them_in_decoding():
    # In training rPosNet's relative position energies are extra products and gathers on top of the
    # Transformer's attention. In decoding its tables are folded when the model is prepared for
    # generation, and a step reads weights made once per table: fewer operators than the Transformer's
    # attention step (issue 48; more on main before 8b07c7a).
    args = _args()
    base = op_counts.count(["posnet_transformer_tiny"], args)["posnet_transformer_tiny"]
    rposnet = op_counts.count(["rposnet_transformer_tiny"], args)["rposnet_transformer_tiny"]
    assert rposnet["train"] > base["train"]
    assert rposnet["decode"] < base["decode"]


def test_the_table_gives_the_transformer_1_00x_and_the_ratios():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        op_counts.main([*TINY, "--archs", "transformer,rposnet_transformer"])
    rows = [line.strip("|").split("|") for line in out.getvalue().splitlines() if line.startswith("| ")]
    header, body = [h.strip() for h in rows[0]], [[c.strip() for c in row] for row in rows[1:]]
    table = {row[0]: dict(zip(header, row)) for row in body}
    assert list(table) == ["posnet_transformer_tiny", "rposnet_transformer_tiny"]
    base, rposnet = table["posnet_transformer_tiny"], table["rposnet_transformer_tiny"]
    assert base["decoding / Transformer"] == base["training / Transformer"] == "1.00x"
    assert rposnet["decoding / Transformer"] == f"{int(rposnet['decoding step']) / int(base['decoding step']):.2f}x"
    assert rposnet["training / Transformer"] == f"{int(rposnet['training step']) / int(base['training step']):.2f}x"
    assert "leaf aten operators" in out.getvalue()


def _event(name, device_type, children=()):
    return types.SimpleNamespace(name=name, device_type=device_type, cpu_children=list(children))


def test_on_cuda_the_kernels_are_counted_and_on_cpu_the_leaf_operators():
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    leaf = _event("aten::addmm", cpu)
    events = [_event("aten::linear", cpu, [leaf]), leaf, _event("aten::view", cpu),
              _event("cudaLaunchKernel", cpu), _event("void gemm_kernel", cuda), _event("Memset (Device)", cuda)]
    profiler = types.SimpleNamespace(events=lambda: events)
    assert op_counts.counted(profiler, "cpu") == 2  # addmm and view; linear composes addmm
    assert op_counts.counted(profiler, "cuda") == 2  # the kernel and the fill


def test_a_cuda_profile_without_kernels_is_an_error():
    profiler = types.SimpleNamespace(events=lambda: [_event("aten::mm", torch.autograd.DeviceType.CPU)])
    with pytest.raises(RuntimeError, match="no CUDA kernel"):
        op_counts.counted(profiler, "cuda")


@pytest.mark.parametrize("argv, message", [
    (["--step", "0"], "--step 0: give a whole number >= 1"),
    (["--batch-size", "-1"], "--batch-size -1: give a whole number >= 1"),
])
def test_bad_options_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit):
        op_counts.parse_args(argv)
    assert message in capsys.readouterr().err
