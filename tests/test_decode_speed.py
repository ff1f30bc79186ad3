"""python -m posnet_fairseq.benchmark.decode_speed: its tables against fake generation times (so a wrong
ratio, ceiling or share fails) on real tiny checkpoints and FLOP counts, and a length a model cannot reach."""
import contextlib
import io

import pytest

from posnet_fairseq.benchmark import decode_speed

# CPU seconds a fake fairseq-generate run takes, per arch, at any length.
CPU_SECONDS = {"posnet_transformer_tiny": 2.0, "aan_plus_avg_tiny": 1.6, "glinearnet_transformer_tiny": 2.5}
SENTENCES = 8


def _tables(output):
    """{table index: [{column: cell}]} of the markdown tables in ``output``."""
    tables, header = [], None
    for line in output.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables.append([])
        elif not set(line) <= set("|-"):
            tables[-1].append(dict(zip(header, cells)))
    return tables


def _decoded(argv):
    """decode_speed.main(argv)'s output and the rows of its first table by arch."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        decode_speed.main(argv)
    return out.getvalue(), {row["arch"]: row for row in _tables(out.getvalue())[0]}


def test_tables_give_the_cpu_time_ratio_the_ceiling_and_the_share(tmp_path, monkeypatch):
    def fake_generate(data_bin, checkpoint, length, results_dir, **kw):
        arch = checkpoint.rsplit("/", 1)[1][:-len(".pt")]
        return {"rate": SENTENCES / CPU_SECONDS[arch], "tokens_per_hyp": length + 1, "cpu_s": CPU_SECONDS[arch]}

    monkeypatch.setattr(decode_speed, "generate_timed", fake_generate)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        decode_speed.main(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "2", "--lengths", "8,130",
                           "--archs", "transformer,aan_plus_avg,glinearnet_transformer", "--workdir", str(tmp_path)])
    per_length, growth = _tables(out.getvalue())
    rows = {(row["arch"], row["output tokens (incl. EOS)"]): row for row in per_length}
    base = CPU_SECONDS["posnet_transformer_tiny"]
    for length in (8, 130):
        transformer = float(rows["posnet_transformer_tiny", str(length + 1)]["MFLOP per token"])
        for arch in ("posnet_transformer_tiny", "aan_plus_avg_tiny"):
            row = rows[arch, str(length + 1)]
            assert row["CPU-time ratio"] == f"{base / CPU_SECONDS[arch]:.2f}x"
            assert float(row["CPU ms per token"]) == pytest.approx(
                1000 * CPU_SECONDS[arch] / (SENTENCES * (length + 1)), abs=1e-3)
            ceiling = transformer / float(row["MFLOP per token"])
            assert float(row["ceiling"].rstrip("x")) == pytest.approx(ceiling, abs=0.02)
            assert float(row["share of ceiling"].rstrip("%")) == pytest.approx(
                100 * base / CPU_SECONDS[arch] / ceiling, abs=2)
    # The Transformer's attention grows with the step; AAN+ AVG's running average does not.
    assert float(rows["aan_plus_avg_tiny", "131"]["ceiling"].rstrip("x")) > \
        float(rows["aan_plus_avg_tiny", "9"]["ceiling"].rstrip("x"))
    # LinearNet's table has 128 positions: 130 tokens + EOS are beyond it, and it is said so.
    assert rows["glinearnet_transformer_tiny", "9"]["CPU-time ratio"] == f"{base / 2.5:.2f}x"
    assert ("glinearnet_transformer_tiny", "131") not in rows
    for row in (row for row in per_length if row["GFLOP/s"]):  # MFLOP per ms = GFLOP per s
        assert float(row["GFLOP/s"]) == pytest.approx(float(row["MFLOP per token"]) / float(row["CPU ms per token"]),
                                                      rel=0.02)
    assert "beyond its 128 target positions" in out.getvalue()
    glinearnet = next(row for row in growth if row["arch"] == "glinearnet_transformer_tiny")
    assert glinearnet["130 / 8"] == "n/a"
    assert glinearnet["speed ratio (ceiling, share) at 130"] == "beyond 128 positions"


@pytest.mark.parametrize("argv, message", [
    (["--lengths", "30,eighty"], "--lengths 30,eighty: give whole numbers"),
    (["--archs", "transformer,aan_plus_avg", "--profile", "ssru"], "--profile ssru is not among --archs"),
    (["--device", "cuda", "--int8"], "--int8 measures CPU decoding: leave it out with --device cuda"),
    (["--archs", "transformer", "--plain-beam", "transformer-int8"],
     "--plain-beam transformer-int8 is not among --archs"),
    (["--device", "cuda", "--archs", "transformer", "--profile", "transformer"],
     "--profile measures CPU decoding: leave it out with --device cuda"),
])
def test_bad_options_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit):
        decode_speed.parse_args(argv)
    assert message in capsys.readouterr().err


def test_int8_rows_and_the_ctranslate2_rows_say_when_ctranslate2_is_missing(tmp_path, monkeypatch):
    """--int8 adds ARCH-int8 rows (the same arithmetic, so the same MFLOP per token); --ctranslate2 without
    ctranslate2 prints its rows with the reason; --against divides by the row named."""
    from posnet_fairseq.benchmark import ctranslate2_decoding

    seconds = {"posnet_transformer_tiny": 2.0, "posnet_transformer_tiny-int8": 1.0, "aan_plus_avg_tiny": 1.6,
               "aan_plus_avg_tiny-int8": 0.8}

    def fake_generate(data_bin, checkpoint, length, results_dir, **kw):
        row = checkpoint.rsplit("/", 1)[1][:-len(".pt")]
        return {"rate": SENTENCES / seconds[row], "tokens_per_hyp": length + 1, "cpu_s": seconds[row]}

    monkeypatch.setattr(decode_speed, "generate_timed", fake_generate)
    monkeypatch.setattr(ctranslate2_decoding, "missing", lambda: "ctranslate2 is not installed (test)")
    _, rows = _decoded(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "1", "--lengths", "8",
                        "--archs", "transformer,aan_plus_avg", "--int8", "--ctranslate2",
                        "--against", "posnet_transformer_tiny-int8", "--workdir", str(tmp_path)])
    for name in ("ctranslate2 fp32", "ctranslate2 int8"):
        assert rows[name]["params"] == "not measured: ctranslate2 is not installed (test)"
    for arch in ("posnet_transformer_tiny", "aan_plus_avg_tiny"):
        assert rows[arch + "-int8"]["MFLOP per token"] == rows[arch]["MFLOP per token"]
    assert rows["posnet_transformer_tiny-int8"]["CPU-time ratio"] == "1.00x"
    assert rows["aan_plus_avg_tiny-int8"]["CPU-time ratio"] == f"{1.0 / 0.8:.2f}x"
    assert rows["posnet_transformer_tiny"]["CPU-time ratio"] == "0.50x"


def test_plain_beam_rows_decode_the_same_checkpoint_with_the_cross_attention_per_hypothesis(tmp_path, monkeypatch):
    """--plain-beam ARCHS: the rows 'ROW plain-beam' decode their row's checkpoint with --no-beamable-mm
    (models/beam_shared.py's per-hypothesis cross attention), alternating with the others in each round, and get
    its arithmetic; the other rows keep the default (no flag)."""
    seconds = {("posnet_transformer_tiny", ()): 2.0, ("posnet_transformer_tiny", ("--no-beamable-mm",)): 2.5,
               ("posnet_transformer_tiny-int8", ()): 1.2, ("aan_plus_avg_tiny", ()): 1.6,
               ("aan_plus_avg_tiny-int8", ()): 1.0,
               ("aan_plus_avg_tiny-int8", ("--no-beamable-mm",)): 1.25}
    calls = []

    def fake_generate(data_bin, checkpoint, length, results_dir, flags=(), **kw):
        key = checkpoint.rsplit("/", 1)[1][:-len(".pt")], tuple(flags)
        calls.append(key)
        return {"rate": SENTENCES / seconds[key], "tokens_per_hyp": length + 1, "cpu_s": seconds[key]}

    monkeypatch.setattr(decode_speed, "generate_timed", fake_generate)
    _, rows = _decoded(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "2", "--lengths", "8",
                        "--archs", "transformer,aan_plus_avg", "--int8", "--plain-beam",
                        "transformer,aan_plus_avg-int8", "--workdir", str(tmp_path)])
    assert rows["posnet_transformer_tiny plain-beam"]["CPU-time ratio"] == "0.80x"
    assert rows["aan_plus_avg_tiny-int8 plain-beam"]["CPU-time ratio"] == f"{2.0 / 1.25:.2f}x"
    assert rows["aan_plus_avg_tiny-int8 plain-beam"]["MFLOP per token"] == rows["aan_plus_avg_tiny"]["MFLOP per token"]
    assert "aan_plus_avg_tiny plain-beam" not in rows and "posnet_transformer_tiny-int8 plain-beam" not in rows
    assert len(calls) == 2 * 6 and calls[:6] == calls[6:] and len(set(calls)) == 6  # every row in each round

def test_fbgemm_rows_decode_the_int8_checkpoint_with_fbgemm_products(tmp_path, monkeypatch):
    """--fbgemm ROWS: 'ARCH-int8 fbgemm' decodes the int8 row's checkpoint with --int8-engine fbgemm set by
    fairseq-generate's --model-overrides, alternating with the row itself (the machine's engine, no flag)."""
    calls = []

    def fake_generate(data_bin, checkpoint, length, results_dir, flags=(), **kw):
        key = checkpoint.rsplit("/", 1)[1][:-len(".pt")], tuple(flags)
        calls.append(key)
        cpu_s = 1.5 if key[1] else 1.0
        return {"rate": SENTENCES / cpu_s, "tokens_per_hyp": length + 1, "cpu_s": cpu_s}

    monkeypatch.setattr(decode_speed, "generate_timed", fake_generate)
    _, rows = _decoded(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "1", "--lengths", "8",
                        "--archs", "aan_plus_avg", "--int8", "--fbgemm", "aan_plus_avg-int8", "--workdir",
                        str(tmp_path)])
    assert ("aan_plus_avg_tiny-int8", ("--model-overrides", "{'int8_engine': 'fbgemm'}")) in calls
    assert ("aan_plus_avg_tiny-int8", ()) in calls and len(calls) == 3
    assert rows["aan_plus_avg_tiny-int8 fbgemm"]["CPU-time ratio"] == f"{1.0 / 1.5:.2f}x"


def test_fbgemm_of_a_row_without_int8_products_is_refused(capsys):
    with pytest.raises(SystemExit):
        decode_speed.parse_args(["--archs", "aan_plus_avg", "--int8", "--fbgemm", "aan_plus_avg"])
    assert "--fbgemm aan_plus_avg: give an int8 row (ARCH-int8, with --int8)" in capsys.readouterr().err


def test_against_a_row_not_measured_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_speed, "generate_timed", lambda *a, **kw: pytest.fail("nothing is timed"))
    with pytest.raises(SystemExit, match="--against ctranslate2 int8: not among the rows measured"):
        decode_speed.main(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "1", "--lengths", "8",
                           "--archs", "transformer", "--against", "ctranslate2 int8", "--workdir", str(tmp_path)])


def test_on_a_gpu_the_ratios_divide_the_gpu_seconds(tmp_path, monkeypatch):
    """--device cuda (the device faked): fairseq-generate runs without --cpu, and the tables divide the
    synchronized wall seconds ("gpu_s"), not the CPU seconds, which on a GPU say nothing of the kernels."""
    import torch

    gpu_seconds = {"posnet_transformer_tiny": 2.0, "aan_plus_avg_tiny": 1.25}
    asked = []

    def fake_generate(data_bin, checkpoint, length, results_dir, cpu=True, **kw):
        asked.append(cpu)
        arch = checkpoint.rsplit("/", 1)[1][:-len(".pt")]
        # CPU seconds equal for both: a table built on them would say 1.00x
        return {"rate": SENTENCES / gpu_seconds[arch], "tokens_per_hyp": length + 1, "cpu_s": 3.0,
                "gpu_s": gpu_seconds[arch]}

    monkeypatch.setattr(decode_speed, "generate_timed", fake_generate)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    output, rows = _decoded(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "1", "--lengths", "8",
                             "--archs", "transformer,aan_plus_avg", "--device", "cuda", "--workdir", str(tmp_path)])
    assert asked and not any(asked)
    assert "GPU (Fake GPU" in output
    assert rows["aan_plus_avg_tiny"]["GPU-time ratio"] == "1.60x"
    assert float(rows["aan_plus_avg_tiny"]["GPU ms per token"]) == pytest.approx(1000 * 1.25 / (SENTENCES * 9),
                                                                                 abs=1e-3)
    assert "CPU-time ratio" not in rows["aan_plus_avg_tiny"]


def test_ctranslate2_on_a_gpu_loads_there_and_reports_its_wall_seconds_as_gpu_seconds(monkeypatch):
    """The CTranslate2 GPU rows (the engine faked): the model loads on the device asked for, and as
    translate_batch returns when the GPU is done, its wall seconds are the rows' gpu_s."""
    import sys
    import types

    from posnet_fairseq.benchmark import ctranslate2_decoding

    loaded, now = [], [10.0]

    class Engine:
        def __init__(self, model_dir, device, **kw):
            loaded.append(device)

        def translate_batch(self, sources, min_decoding_length, **kw):
            now[0] += 0.5
            return [types.SimpleNamespace(hypotheses=[["w"] * min_decoding_length]) for _ in sources]

    monkeypatch.setitem(sys.modules, "ctranslate2", types.SimpleNamespace(Translator=Engine))
    monkeypatch.setattr(ctranslate2_decoding.time, "perf_counter", lambda: now[0])
    on_gpu = ctranslate2_decoding.Translator("model", "float32", device="cuda").translate_timed([["a"]] * 4, 7)
    on_cpu = ctranslate2_decoding.Translator("model", "float32").translate_timed([["a"]] * 4, 7)
    assert loaded == ["cuda", "cpu"]
    assert on_gpu["gpu_s"] == 0.5 and on_gpu["rate"] == 8.0 and on_gpu["tokens_per_hyp"] == 8
    assert "gpu_s" not in on_cpu


def test_device_cuda_without_a_gpu_is_refused(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(decode_speed, "generate_timed", lambda *a, **kw: pytest.fail("nothing is timed"))
    with pytest.raises(SystemExit, match="--device cuda: no CUDA device is visible"):
        decode_speed.main(["--size", "tiny", "--archs", "transformer", "--device", "cuda",
                           "--workdir", str(tmp_path)])


def test_a_models_own_generation_flags_are_given_and_the_timing_settings_win(tmp_path, monkeypatch):
    """time_rounds gives each model its own fairseq-generate flags (posnet-compare's --arch-generate-flags);
    generate_timed puts them first, so that the beam, batch and forced output length of the timing override a
    model's own."""
    import logging

    from fairseq_cli import generate as fairseq_generate

    seen = {}

    def fake_main(gen_args):
        seen[gen_args.path] = gen_args
        logging.getLogger("fairseq_cli.generate").info(
            "Translated 4 sentences (36 tokens) in 0.1s (40.00 sentences/s, 360.0 tokens/s)")

    monkeypatch.setattr(fairseq_generate, "main", fake_main)
    own = ["--model-overrides", "{'dropout': 0.3}", "--beam", "9", "--max-len-b", "99", "--lenpen", "0.5"]
    decode_speed.time_rounds({8: {"own": "own.pt", "plain": "plain.pt"}}, str(tmp_path), 1, str(tmp_path),
                             flags={"own": own}, beam=2, batch_size=4)
    assert seen["own.pt"].model_overrides == "{'dropout': 0.3}" and seen["own.pt"].lenpen == 0.5
    assert seen["plain.pt"].model_overrides == "{}" and seen["plain.pt"].lenpen == 1
    for args in seen.values():
        assert (args.beam, args.batch_size, args.min_len, args.max_len_b) == (2, 4, 8, 8)
