"""CUDA and mixed precision: the mixer contract on the GPU in fp32, fp16 and bf16,
fairseq-train with --fp16 / --memory-efficient-fp16 / --amp, fairseq-generate --fp16,
and the fp32 islands that the numerics need (on every device, CPU included).

Without a CUDA device the GPU tests are skipped with the reason "no CUDA device",
which ``pytest -rs`` (tests/run.sh) lists in its summary: they are never counted
as passed. ``tests/run-gpu.sh`` runs this module with ``POSNET_REQUIRE_CUDA=1``,
which turns a missing GPU into an error.

Tolerances. fp32 is held to the CPU contract's 1e-5 (plus 1e-5 relative: GPU
kernels pick different reduction orders for different batch shapes). fp16 and
bf16 are held to 16 units in the last place of each format (float16 eps 2^-10,
bfloat16 eps 2^-7), absolute and relative, on logits of size ~1-10: the same
computation in a different batch shape or step by step differs by rounding
only, so anything beyond a few ulps is a bug, not noise.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from fairseq_testing import (
    FAMILY_ARCHS,
    PLUGIN_DIR,
    check_beam_reordering,
    check_finite_at_longest_length,
    check_incremental_equals_teacher_forced,
    check_padding_invariance,
    copy_as,
    random_sentences,
    src_batch,
    tgt_batch,
    write_synthetic_data_bin,
)
from test_mixer_contract import CASE_IDS, CASES, _model

HAVE_CUDA = torch.cuda.is_available()
if os.environ.get("POSNET_REQUIRE_CUDA") == "1" and not HAVE_CUDA:
    raise RuntimeError("POSNET_REQUIRE_CUDA=1 but torch.cuda.is_available() is False: no CUDA device "
                       f"(torch {torch.__version__}, CUDA build {torch.version.cuda})")
NO_CUDA = "no CUDA device (torch.cuda.is_available() is False): run tests/run-gpu.sh on a GPU machine"
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason=NO_CUDA)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCE = {torch.float32: 1e-5, torch.float16: 16 * 2.0 ** -10, torch.bfloat16: 16 * 2.0 ** -7}


@pytest.fixture(params=CASES, ids=CASE_IDS)
def cuda_case(request):
    name, site, variant, _ = request.param
    model, task = _model(name, site, variant)
    return model, task.source_dictionary, site


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("check", [check_padding_invariance, check_incremental_equals_teacher_forced,
                                   check_beam_reordering], ids=lambda f: f.__name__[len("check_"):])
def test_contract_on_cuda(cuda_case, dtype, check):
    model, d, _ = cuda_case
    tol = TOLERANCE[dtype]
    check(copy_as(model, dtype, "cuda"), d, atol=tol, rtol=tol)


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_finite_at_the_longest_length_on_cuda(cuda_case, dtype):
    model, d, site = cuda_case
    check_finite_at_longest_length(copy_as(model, dtype, "cuda"), d, site)


# ----- fp32 where the numerics need it, whatever the model dtype -----
# --fp16 and --memory-efficient-fp16 run a half model ("half"); --amp runs an
# fp32 model under autocast, which computes matmuls, linear layers and einsum in
# the low-precision dtype ("autocast"). CPU autocast does the same for those ops,
# so these run here too.

DEVICES = ["cpu"] + (["cuda"] if HAVE_CUDA else [])


def _run_model(model, d, device, dtype, mode):
    """Teacher-forced forward and 4 incremental decoder steps, in ``mode``."""
    model = copy_as(model, dtype if mode == "half" else torch.float32, device)
    g = torch.Generator().manual_seed(4)
    tokens, lengths = (t.to(device) for t in src_batch(random_sentences([6, 3], g, d), d.pad(), d.eos()))
    prev = tgt_batch(random_sentences([4, 4], g, d), d.pad(), d.eos()).to(device)
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=mode == "autocast"):
        enc = model.encoder(tokens, lengths)
        model.decoder(prev, encoder_out=enc)
        state = {}
        for t in range(prev.size(1)):
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
    return model, state


def _spy(monkeypatch, owner, name, seen):
    """Wraps ``owner.name`` so that the dtype of each tensor it returns is recorded."""
    original = getattr(owner, name)

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(out.dtype)
        return out

    monkeypatch.setattr(owner, name, spy)


MODES = [(mode, dtype) for mode in ("half", "autocast") for dtype in (torch.float16, torch.bfloat16)]
MODE_IDS = [f"{mode}-{str(dtype)[6:]}" for mode, dtype in MODES]


# Decoder mixers whose decoding state is a running sum (AAN+'s numerator,
# denominator and reference; SSRU's cell; linear attention's S and z): in fp16
# a running sum of exp(alpha k) terms overflows near k = 111, and long sums lose
# the small late terms.
RUNNING_SUMS = [("aan", "default"), ("aan", "ner"), ("aan", "wet"), ("aan", "wet_relu"), ("ssru", "default"),
                ("linear_attention", "default")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, variant, mode, dtype", [
    pytest.param(*case, mode, dtype, id=f"{'-'.join(case)}-{i}")
    for case in RUNNING_SUMS for (mode, dtype), i in zip(MODES, MODE_IDS)])
def test_running_sums_stay_fp32(device, name, variant, mode, dtype):
    """Every floating-point tensor of the decoder mixer's decoding state is fp32."""
    model, task = _model(name, "decoder_self", variant)
    model, state = _run_model(model, task.source_dictionary, device, dtype, mode)
    sums = {f"layer{i}.{key}": tensor.dtype
            for i, layer in enumerate(model.decoder.layers)
            for key, tensor in layer.self_attn._get_input_buffer(state).items()
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point()}  # (a step count is a Python int)
    assert sums, "no decoding state was written"
    assert set(sums.values()) == {torch.float32}, sums


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode, dtype", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, site", [("hc_gaussian", "encoder_self"), ("hc_gaussian", "decoder_self"),
                                        ("hc_gaussian_cross", "cross")])
def test_hard_coded_pdfs_stay_fp32(monkeypatch, device, mode, dtype, name, site):
    from posnet_fairseq.mixers import hc_gaussian

    seen = []
    _spy(monkeypatch, hc_gaussian, "hard_coded_weights", seen)
    model, task = _model(name, site, "default")
    _run_model(model, task.source_dictionary, device, dtype, mode)
    assert seen and set(seen) == {torch.float32}, seen


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode, dtype", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, site", [("tisa", "encoder_self"), ("tisa", "decoder_self")])
def test_tisa_profiles_stay_fp32(monkeypatch, device, mode, dtype, name, site):
    from posnet_fairseq.mixers import tisa

    seen = []
    # kernel_sums: every TISA bias comes from it (a layer's profile, or one call for every layer of a side)
    _spy(monkeypatch, tisa, "kernel_sums", seen)
    model, task = _model(name, site, "default")
    _run_model(model, task.source_dictionary, device, dtype, mode)
    assert seen and set(seen) == {torch.float32}, seen


POSNET_SITES = [("rposnet", "decoder_self"), ("aposnet", "encoder_self"), ("arposnet", "cross")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, site, mode, dtype", [(n, s, m, d) for n, s in POSNET_SITES for m, d in MODES])
def test_posnet_position_energies_stay_fp32(monkeypatch, device, mode, dtype, name, site):
    """PosNet's position energies (and the tables they are folded into) are fp32."""
    from posnet_fairseq.mixers import position_energies

    seen = []
    for term in (position_energies.RelativeEnergies, position_energies.AbsoluteEnergies):
        _spy(monkeypatch, term, "compute", seen)
    model, task = _model(name, site, "default")
    _run_model(model, task.source_dictionary, device, dtype, mode)
    assert seen and set(seen) == {torch.float32}, seen


# ----- fairseq-train / fairseq-generate in mixed precision on the GPU -----

UPDATES = 300
PRECISIONS = ["--fp16", "--memory-efficient-fp16", "--amp"]


@pytest.fixture(scope="module")
def gpu_data_bin(tmp_path_factory):
    return write_synthetic_data_bin(str(tmp_path_factory.mktemp("synthetic")), train=2000, valid=50, test=200)


def _train(data_bin, save_dir, arch, precision):
    """fairseq-train ``UPDATES`` updates on the GPU; returns the json log records."""
    cmd = [sys.executable, "-m", "fairseq_cli.train", data_bin, "--user-dir", PLUGIN_DIR, "--arch", arch,
           precision, "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "0.001",
           "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50", "--max-tokens", "2000",
           "--max-update", str(UPDATES), "--save-dir", save_dir, "--no-epoch-checkpoints",
           "--disable-validation", "--num-workers", "0", "--seed", "1", "--log-format", "json",
           "--log-interval", "25", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    # train_inner records: {"epoch": 1, "update": <fractional epoch>, "loss": ..., "num_updates": ...}
    records = [json.loads(m) for m in re.findall(r"(\{\"epoch\".*\})", log)]
    return [r for r in records if "num_updates" in r and "loss" in r], log


@needs_cuda
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("arch", FAMILY_ARCHS)
def test_mixed_precision_training(gpu_data_bin, tmp_path, arch, precision):
    """300 updates: the loss decreases and the loss scaler does not collapse."""
    steps, log = _train(gpu_data_bin, str(tmp_path / "ckpt"), arch, precision)
    assert steps and int(steps[-1]["num_updates"]) == UPDATES, log[-3000:]
    first, last = float(steps[0]["loss"]), float(steps[-1]["loss"])
    assert last < 0.8 * first, f"loss {first} -> {last}"
    scales = [float(r["loss_scale"]) for r in steps if "loss_scale" in r]
    assert scales, "no loss_scale in the training log"
    # fairseq starts at 128 (--fp16-init-scale) and stops with FloatingPointError
    # at --min-loss-scale 1e-4; a healthy run keeps the scale well above 1.
    assert min(scales[len(scales) // 2:]) >= 1.0, scales


def _hypotheses(data_bin, checkpoint, fp16):
    cmd = [sys.executable, "-m", "fairseq_cli.generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint,
           "--beam", "4", "--batch-size", "64", "--gen-subset", "test", "--num-workers", "0"]
    result = subprocess.run(cmd + (["--fp16"] if fp16 else []), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return dict(re.findall(r"^H-(\d+)\t\S+\t(.*)$", result.stdout, flags=re.M))


@needs_cuda
@pytest.mark.parametrize("arch", FAMILY_ARCHS)
def test_generate_fp16_matches_fp32(gpu_data_bin, tmp_path, arch):
    """A model trained 300 updates (--amp) translates the same in fp16 as in fp32
    on at least 95% of the test sentences."""
    _train(gpu_data_bin, str(tmp_path / "ckpt"), arch, "--amp")
    checkpoint = str(tmp_path / "ckpt" / "checkpoint_last.pt")
    fp32, fp16 = _hypotheses(gpu_data_bin, checkpoint, False), _hypotheses(gpu_data_bin, checkpoint, True)
    assert len(fp32) == len(fp16) == 200
    same = sum(fp32[i] == fp16[i] for i in fp32)
    assert same >= 0.95 * len(fp32), f"{same}/{len(fp32)} identical hypotheses"


@needs_cuda
def test_compare_trains_and_times_on_the_gpu(tmp_path):
    """posnet-compare in micro mode with a GPU: the models train there in fp16, one per GPU at a time, the
    speeds are measured there, and results.md says so."""
    out = tmp_path / "run"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tiny = ("--encoder-embed-dim 16 --encoder-ffn-embed-dim 32 --encoder-attention-heads 2 --encoder-layers 1 "
            "--decoder-embed-dim 16 --decoder-ffn-embed-dim 32 --decoder-attention-heads 2 --decoder-layers 1")
    archs = ["posnet_transformer_tiny", "aan_plus_avg_tiny"]
    done = subprocess.run(
        [sys.executable, "-m", "posnet_fairseq.cli.compare", "--archs", ",".join(archs), "--out", str(out),
         "--budget", "20u", "--train-pairs", "300", "--valid", "10", "--test", "40", "--train-max-len", "10",
         "--vocab-size", "400", "--interval", "10", "--decode-lengths", "8", "--decode-sentences", "4",
         "--decode-rounds", "1", "--step-rounds", "1", "--timed-steps", "1", "--bootstrap-samples", "50",
         "--min-bucket-sentences", "8", "--model-flags", tiny],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=repo), timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    gpus = torch.cuda.device_count()
    assert f"{gpus} at a time on {gpus} GPU(s), fp16" in done.stdout  # one model per GPU
    for arch in archs:
        log = (out / "checkpoints" / f"{arch}.train.log").read_text()
        assert "loss_scale" in log  # fairseq's fp16 optimizer ran
        assert "'cpu': True" not in log
    text = (out / "results.md").read_text()
    assert f"devices: GPU ({torch.cuda.get_device_name(0)})" in text and "fp16" in text
    with open(out / "cost.json") as f:
        cost = json.load(f)
    assert cost["settings"]["device"] == torch.cuda.get_device_name(0)
    assert all(cost["training_steps"][arch]["tokens_per_s"] > 0 for arch in archs)


@needs_cuda
def test_decode_speed_times_on_the_gpu(tmp_path, capsys):
    """The decoding benchmark with --device cuda: the models decode on the GPU, the header names it and the
    ratios divide GPU seconds (synchronized wall time), which are positive."""
    from posnet_fairseq.benchmark import decode_speed

    decode_speed.main(["--quick", "--device", "cuda", "--archs", "transformer,aan_plus_avg",
                       "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"GPU ({torch.cuda.get_device_name()}" in out
    header = next(line for line in out.splitlines() if line.startswith("| arch | params"))
    assert "GPU-time ratio" in header and "CPU-time ratio" not in header
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| aan_plus_avg_tiny |")]
    gpu_seconds = float(rows[0][header.split("|").index(" GPU s (median) ")])
    assert gpu_seconds > 0
