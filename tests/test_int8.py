"""int8 decoding (models/int8.py) and posnet-quantize: which linear layers become int8, the engine, fairseq's
MultiheadAttention fast path, and a quantised checkpoint decoded by fairseq's own fairseq-generate.
(Incremental == teacher-forced in int8, for every mixer: tests/test_mixer_contract.py.)"""
import ast
import copy
import os

import pytest
import torch
from fairseq import options
from torch import nn
from torch.ao.nn.quantized import dynamic

import fairseq_testing as ft
from posnet_fairseq.cli import quantize as quantize_cli
from posnet_fairseq.models import int8


def _linears(model, kind):
    return {name for name, m in model.named_modules() if type(m) is kind}


@pytest.mark.parametrize("mode", ["all", "fp32-output"])
def test_every_linear_layer_becomes_int8_but_the_fp32_ones(mode):
    model, _ = ft.build_model(["--decoder-self-mixer", "aan", "--aan-patterns", "avg,wet",
                               "--encoder-self-mixer", "rposnet"])
    before = _linears(model, nn.Linear)
    int8.quantize_(model, mode)
    kept = {"decoder.output_projection"} if mode == "fp32-output" else set()
    kept |= {name for name in before if name.endswith((".wet_proj", ".relative.q_proj", ".relative.k_proj"))}
    assert any(name.endswith(".wet_proj") for name in kept) and any(".relative." in name for name in kept)
    assert _linears(model, nn.Linear) == kept
    assert _linears(model, dynamic.Linear) == before - kept


def test_each_output_row_keeps_its_own_scale():
    """A row of small weights is rounded to steps of its own size (its largest weight / 127.5): at most half a
    step off, where one scale per matrix would round it in the largest row's steps (the rows here span 1x-100x)."""
    model, _ = ft.build_model()
    projection = model.decoder.output_projection
    with torch.no_grad():
        projection.weight.mul_(torch.logspace(0, -2, projection.weight.size(0)).unsqueeze(1))
    fp32 = projection.weight.detach().clone()
    int8.quantize_(model, "all")
    weight = model.decoder.output_projection.weight()
    assert weight.qscheme() == torch.per_channel_affine and weight.q_per_channel_scales().numel() == fp32.size(0)
    row_max = fp32.abs().amax(1, keepdim=True)
    assert ((weight.dequantize() - fp32).abs() <= row_max / 254).all()
    assert (weight.dequantize() - fp32).abs()[-1].max() < fp32.abs().max() / 127 / 2 / 50


def test_a_checkpoint_quantised_per_tensor_still_loads_per_tensor(monkeypatch):
    """The stored int8 weights carry their scheme: a model quantised with one scale per matrix (as posnet-quantize
    did before the scale per row) loads into the model fairseq rebuilds and gives the same logits."""
    model, task = ft.build_model()
    with monkeypatch.context() as m:
        m.setattr(int8, "QCONFIG", torch.ao.quantization.default_dynamic_qconfig)
        old = int8.quantize_(copy.deepcopy(model), "all")
    rebuilt = int8.quantize_(copy.deepcopy(model), "all")
    assert rebuilt.decoder.output_projection.weight().qscheme() == torch.per_channel_affine
    rebuilt.load_state_dict(old.state_dict())
    assert rebuilt.decoder.output_projection.weight().qscheme() == torch.per_tensor_affine
    tokens, lengths, prev = ft.random_batch(task.source_dictionary, [5, 3], [4, 4])
    with torch.no_grad():
        assert torch.equal(old(tokens, lengths, prev)[0], rebuilt(tokens, lengths, prev)[0])


def _engine_output(layer, x, engine):
    """``layer``'s int8 product of ``x`` with its weights packed afresh for ``engine``."""
    with int8.packed_for(engine):
        packed = torch.ops.quantized.linear_prepack(*layer._packed_params._weight_bias())
    return torch.ops.quantized.linear_dynamic(x, packed, True)


@pytest.mark.skipif("onednn" not in torch.backends.quantized.supported_engines,
                    reason="this torch build has no oneDNN quantized engine")
def test_a_model_keeps_its_engine_through_loading_and_the_engines_share_the_weights(monkeypatch):
    """--int8-engine: the layers are packed for the chosen engine when made and again when fairseq loads the
    stored weights into them, whatever torch's global engine is then; the stored int8 weights are the same for
    every engine (one checkpoint serves both), and the engines' products differ only by float rounding."""
    model, _ = ft.build_model()
    by_engine = {name: int8.quantize_(copy.deepcopy(model), "all", name) for name in ("fbgemm", "onednn")}
    stored = {name: m.state_dict() for name, m in by_engine.items()}
    weights = [key for key in stored["fbgemm"] if key.endswith("_packed_params._packed_params")]
    assert weights and all(torch.equal(stored["fbgemm"][k][0].int_repr(), stored["onednn"][k][0].int_repr())
                           for k in weights)
    torch.manual_seed(0)
    x = torch.randn(64, model.decoder.layers[0].fc1.in_features)
    references = {name: _engine_output(by_engine["fbgemm"].decoder.layers[0].fc1, x, name)
                  for name in ("fbgemm", "onednn")}
    assert not torch.equal(references["fbgemm"], references["onednn"])  # so the checks below tell them apart
    torch.testing.assert_close(references["onednn"], references["fbgemm"], rtol=1e-5, atol=1e-6)
    for name, other in (("onednn", "fbgemm"), ("fbgemm", "onednn")):
        monkeypatch.setattr(torch.backends.quantized, "engine", other)  # torch's setting is the other engine
        loaded = int8.quantize_(copy.deepcopy(model), "all", name)
        loaded.load_state_dict(stored["fbgemm"])
        assert torch.backends.quantized.engine == other
        with torch.no_grad():
            assert torch.equal(loaded.decoder.layers[0].fc1(x), references[name])


@pytest.mark.skipif("onednn" not in torch.backends.quantized.supported_engines,
                    reason="this torch build has no oneDNN quantized engine")
def test_an_int8_layer_keeps_its_engine_when_weights_are_loaded_into_it_alone(monkeypatch):
    """The engine is kept by each int8 layer (int8.keep_engine), not by the PosNet model: a layer of any module
    quantize_ makes int8, weights loaded into that layer alone while torch's global engine is the other one,
    still runs its own engine's products."""
    torch.manual_seed(0)
    fp32 = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32))
    x = torch.randn(64, 64)
    for name, other in (("onednn", "fbgemm"), ("fbgemm", "onednn")):
        layer = int8.quantize_(copy.deepcopy(fp32), "all", name)[0]
        stored = int8.quantize_(copy.deepcopy(fp32), "all", other)[0].state_dict()
        monkeypatch.setattr(torch.backends.quantized, "engine", other)
        layer.load_state_dict(stored)
        assert layer.quantized_engine == name and torch.backends.quantized.engine == other
        with torch.no_grad():
            assert torch.equal(layer(x), _engine_output(layer, x, name))
            assert not torch.equal(layer(x), _engine_output(layer, x, other))


def _supported_engines(monkeypatch, engines):
    # a read-only property of torch.backends.quantized's class
    monkeypatch.setattr(type(torch.backends.quantized), "supported_engines", property(lambda self: engines))


def test_an_engine_this_torch_lacks_names_the_flag(monkeypatch):
    _supported_engines(monkeypatch, ["qnnpack", "none"])
    with pytest.raises(ValueError, match="--int8-engine onednn: this torch build has no onednn engine "
                                         r"\(it has qnnpack\)"):
        int8.engine("onednn")
    with pytest.raises(ValueError, match="--int8-engine mkl: choose from auto, fbgemm, onednn"):
        int8.engine("mkl")


def test_engine_overrides_set_the_flag_through_fairseq_generates_model_overrides():
    """The one spelling of the override (decode_speed's --fbgemm rows, int8_bleu's FBGEMM row): fairseq evaluates
    --model-overrides as a Python dict of model arguments."""
    option, overrides = int8.engine_overrides("fbgemm")
    assert option == "--model-overrides" and ast.literal_eval(overrides) == {int8.ENGINE_FLAG.dest: "fbgemm"}
    with pytest.raises(ValueError, match="--int8-engine mkl: choose from auto, fbgemm, onednn"):
        int8.engine_overrides("mkl")


def test_auto_takes_onednn_only_on_a_cpu_with_amx(monkeypatch):
    monkeypatch.setattr(torch.backends.quantized, "engine", "x86")
    for engines, amx, expected in ((["onednn", "x86", "fbgemm"], True, "onednn"),
                                   (["onednn", "x86", "fbgemm"], False, "x86"), (["x86", "fbgemm"], True, "x86")):
        _supported_engines(monkeypatch, engines)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx)
        assert int8.engine("auto") == expected


def test_multihead_attention_leaves_its_fast_path_that_reads_the_weights():
    """fairseq's MultiheadAttention hands q_proj.weight to F.multi_head_attention_forward outside incremental
    decoding; quantised, ``weight`` is a method and that path would fail."""
    model, task = ft.build_model()
    int8.quantize_(model, "all")
    d = task.source_dictionary
    tokens, lengths, prev = ft.random_batch(d, [5, 3], [4, 4])
    with torch.no_grad():
        assert torch.isfinite(model(tokens, lengths, prev)[0]).all()
    assert all(layer.self_attn.skip_embed_dim_check for layer in model.encoder.layers)


def test_unknown_mode_names_the_flag():
    model, _ = ft.build_model()
    with pytest.raises(ValueError, match="--int8-linear half: choose from off, all, fp32-output"):
        int8.quantize_(model, "half")


@pytest.mark.parametrize("fp32_output", [False, True], ids=["all", "fp32-output"])
def test_posnet_quantize_writes_a_checkpoint_stock_fairseq_generate_decodes(tmp_path, capsys, fp32_output):
    from fairseq_cli import generate

    data = ft.write_synthetic_data_bin(str(tmp_path), train=60, valid=8, test=8)
    trained, _ = ft.train_and_generate(data, str(tmp_path / "ckpt"), "aan_plus_avg_tiny",
                                       extra=["--share-all-embeddings"])
    quantized = str(tmp_path / "int8.pt")
    quantize_cli.main([trained, quantized] + (["--fp32-output"] if fp32_output else []))
    report = capsys.readouterr().out
    assert f"int8 linear layers ({'fp32-output' if fp32_output else 'all'}) -> {quantized}" in report
    difference = float(report.split("random batches: ")[1].split()[0])
    assert 0 < difference < 1  # int8 rounds, and only that

    out = ft.run_cli(generate.main, [  # fairseq's own generate, the plugin named with --user-dir only
        data, "--user-dir", ft.PLUGIN_DIR, "--path", quantized, "--beam", "4", "--batch-size", "8", "--cpu",
        "--gen-subset", "test", "--max-len-b", "20", "--num-workers", "0", "--required-batch-size-multiple", "1",
    ], options.get_generation_parser)
    assert len([line for line in out.splitlines() if line.startswith("H-")]) == 8
    with pytest.raises(SystemExit, match="already quantised"):
        quantize_cli.main([quantized, str(tmp_path / "twice.pt")])
    assert not os.path.exists(tmp_path / "twice.pt")
