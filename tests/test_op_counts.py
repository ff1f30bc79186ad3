"""posnet_fairseq.benchmark.op_counts: operators per decoding and training step, from torch.profiler.

The counts are checked on real CPU runs of tiny models; the CUDA count (kernels) with a profiler whose
events are given, as no GPU is needed to check what is counted."""
import contextlib
import io
import types

import pytest
import torch

from posnet_fairseq.benchmark import host_time, launches, op_counts

TINY = ["--size", "tiny", "--vocab", "64", "--batch-size", "2", "--train-batch", "2", "--train-length", "8",
        "--source-length", "8", "--step", "4", "--host-rounds", "0"]


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


def test_a_model_that_needs_the_length_ratio_is_counted_without_data():
    """Spread randomized test positions read the length ratio, which fairseq-train computes from the training set:
    the decoding step, built without data, stopped with 'cannot compute the length ratio'. It is built with the
    placeholder ratio, as the training step is (benchmark.training_step.build_without_data)."""
    args = _args("--decoder-position-augmentation", "randomized", "--randomized-test-positions", "spread")
    counts = op_counts.count(["posnet_transformer_tiny"], args)["posnet_transformer_tiny"]
    assert counts["decode"] > 0 and counts["train"] > 0


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
    for column in ("decoding launches", "training launches"):
        assert base[f"{column} / Transformer"] == "1.00x"
        assert rposnet[f"{column} / Transformer"] == f"{int(rposnet[column]) / int(base[column]):.2f}x"


def _event(name, device_type=torch.autograd.DeviceType.CPU, children=()):
    event = types.SimpleNamespace(name=name, device_type=device_type, cpu_children=list(children), cpu_parent=None)
    for child in children:
        child.cpu_parent = event
    return event


def _all(*roots):
    """The events of the trees under ``roots``, parents first, as the profiler lists them."""
    return [event for root in roots for event in [root, *_all(*root.cpu_children)]]


def _is_view(name):
    """Whether the aten operator ``name`` returns an alias of its input that it does not write: a view."""
    op = getattr(torch.ops.aten, name[len("aten::"):])
    return any(r.alias_info is not None and not r.alias_info.is_write
               for overload in op.overloads() for r in getattr(op, overload)._schema.returns)


def test_launches_are_deterministic_and_fewer_than_the_leaf_operators():
    args = _args()
    first = op_counts.count(["posnet_transformer_tiny"], args)["posnet_transformer_tiny"]
    assert first == op_counts.count(["posnet_transformer_tiny"], args)["posnet_transformer_tiny"]
    assert 0 < first["decode launches"] < first["decode"]
    assert 0 < first["train launches"] < first["train"]


@pytest.mark.parametrize("arch", ["posnet_transformer_tiny", "rposnet_transformer_tiny"])
def test_no_view_is_counted_as_a_launch(arch):
    # Every operator the steps run that returns a view of its input (by its schema) is in NO_KERNEL: one
    # missing from it, counted as a launch, fails here.
    args = _args()
    names = set(op_counts.decoding_step_ops(arch, args, lambda profiler, _: launches.launching(profiler.events())))
    names |= set(op_counts.training_step_ops(arch, args, lambda profiler, _: launches.launching(profiler.events()),
                                             foreach=True))
    assert _is_view("aten::transpose") and not _is_view("aten::copy_") and not _is_view("aten::addmm")
    assert names and not {name for name in names if _is_view(name)}
    assert not (names & launches.NO_KERNEL) - launches.ONE_KERNEL_ON_CUDA and not names & launches.HOST_READS


def test_a_launch_is_the_innermost_operator_that_is_no_view_and_a_foreach_or_dropout_counts_once():
    add = _event("aten::add")
    linear = _event("aten::linear", children=[_event("aten::t"), _event("aten::addmm")])
    read = _event("aten::item", children=[_event("aten::_local_scalar_dense")])
    noop = _event("aten::to")  # a cast to the dtype the tensor has: no callee
    cast = _event("aten::to", children=[_event("aten::_to_copy", children=[_event("aten::empty_strided"),
                                                                          _event("aten::copy_")])])
    foreach = _event("aten::_foreach_mul_", children=[_event("aten::mul_"), _event("aten::mul_")])
    optimizer = _event("Optimizer.step#Adam.step", children=[foreach, _event("aten::item"), _event("aten::sqrt")])
    dropout = _event("aten::dropout", children=[_event("aten::empty_like"), _event("aten::bernoulli_"),
                                                _event("aten::div_"), _event("aten::mul")])
    events = _all(add, linear, read, noop, cast, _event("aten::view", children=[_event("aten::as_strided")]),
                  optimizer, dropout, _event("aten::dropout"))  # the second in eval: a no-op
    assert sorted(launches.launching(events)) == ["aten::_foreach_mul_", "aten::add", "aten::addmm", "aten::copy_",
                                                  "aten::dropout"]
    assert "aten::_local_scalar_dense" in launches.launching(events, host_reads=True)


def test_the_tests_count_launches_with_the_benchmarks_no_kernel_set():
    import fairseq_testing
    import test_content_attention

    assert test_content_attention.NO_KERNEL is launches.NO_KERNEL
    x = torch.randn(4, 6)
    names = fairseq_testing.launching_kernels(lambda: x.view(6, 4).t().unsqueeze(0).contiguous().neg())
    assert names == ["aten::copy_", "aten::neg"]  # contiguous of the transposed view copies


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
    (["--host-rounds", "-1"], "--host-rounds -1: give a whole number >= 0"),
    (["--host-repeats", "0"], "--host-repeats 0: give a whole number >= 1"),
])
def test_bad_options_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit):
        op_counts.parse_args(argv)
    assert message in capsys.readouterr().err


def _table_rows(text):
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    header = [h.strip() for h in rows[0]]
    return {row[0].strip(): dict(zip(header, (c.strip() for c in row))) for row in rows[1:]}


def test_host_times_are_printed_in_ms_beside_the_counts_with_the_speed_against_the_transformer(monkeypatch):
    # The timings are given (a slow machine changes them, not the arithmetic): a step taking twice the
    # Transformer's time runs at 0.50x its speed.
    times = {"posnet_transformer_tiny": {"train ms": 20.0, "decode ms": 4.0},
             "rposnet_transformer_tiny": {"train ms": 25.0, "decode ms": 2.0}}
    seen = {}

    def measure(archs, beam, model_flags, rounds, repeats):
        seen.update(archs=archs, rounds=rounds, repeats=repeats)
        return {arch: dict(times[arch]) for arch in archs}

    monkeypatch.setattr(host_time, "measure", measure)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        op_counts.main([*TINY, "--archs", "transformer,rposnet_transformer", "--host-rounds", "2",
                        "--host-repeats", "3"])
    assert seen == {"archs": list(times), "rounds": 2, "repeats": 3}
    table = _table_rows(out.getvalue())
    base, rposnet = table["posnet_transformer_tiny"], table["rposnet_transformer_tiny"]
    assert (rposnet["training host ms"], rposnet["training speed / Transformer"]) == ("25.00", "0.80x")
    assert (rposnet["decoding host ms"], rposnet["decoding speed / Transformer"]) == ("2.00", "2.00x")
    assert base["training speed / Transformer"] == base["decoding speed / Transformer"] == "1.00x"
    assert rposnet["training / Transformer"] == f"{int(rposnet['training step']) / int(base['training step']):.2f}x"
    header = [line for line in out.getvalue().splitlines() if line.startswith("# host time")]
    assert len(header) == 1 and "CPU issue time" in header[0] and "load average" in header[0]
    assert "2 rounds of 3 repetitions" in header[0]


def test_without_host_rounds_the_table_has_no_host_columns():
    cols = [name for _, name, _, _ in op_counts.columns(_args())]
    assert cols == ["decoding step", "decoding launches", "training step", "training launches"]
    assert "training host ms" in [name for _, name, _, _ in op_counts.columns(_args("--host-rounds", "1"))]


def test_the_speed_ratio_is_the_transformers_time_over_the_archs():
    assert host_time.speed_ratio(25.0, 20.0) == 0.8
    assert host_time.speed_ratio(10.0, 20.0) == 2.0


def test_the_proxy_keeps_the_archs_depth_and_heads_and_narrows_the_width():
    flags = host_time.narrow_flags("rposnet_transformer_base", ["--decoder-layers", "2"])
    from posnet_fairseq.benchmark.training_step import parse_train_args

    args = parse_train_args(["--arch", "rposnet_transformer_base", *flags])
    assert (args.encoder_layers, args.decoder_layers, args.encoder_attention_heads) == (6, 2, 8)
    assert (args.encoder_embed_dim, args.decoder_embed_dim) == (8 * host_time.HEAD_WIDTH,) * 2
    assert args.encoder_ffn_embed_dim == args.decoder_ffn_embed_dim == 4 * 8 * host_time.HEAD_WIDTH


def test_the_host_time_of_every_step_is_measured_for_every_arch():
    archs = ["posnet_transformer_tiny", "aposnet_transformer_tiny"]
    threads = torch.get_num_threads()
    times = host_time.measure(archs, beam=2, rounds=2, repeats=1)
    assert list(times) == archs
    assert all(set(t) == {"train ms", "decode ms"} and min(t.values()) > 0 for t in times.values())
    assert torch.get_num_threads() == threads  # one thread while timing only
