"""posnet_fairseq.benchmark.train_speed and its training step (posnet_fairseq.benchmark.training_step).

The timed columns are checked with a clock that advances a known time per step, so a wrong tokens/s, ratio,
ceiling or share fails; the rest on real CPU runs of tiny models."""
import contextlib
import io
import types

import pytest

from posnet_fairseq.benchmark import FAMILIES, resolve, train_speed, training_step
from posnet_fairseq.benchmark.flops import count

# Seconds per step (wall and CPU alike) that the fake clock charges each arch.
STEP_SECONDS = {"posnet_transformer_tiny": 0.2, "transformer_nosa_tiny": 0.1, "hc_gaussian_shx_tiny": 0.125,
                "aan_plus_avg_tiny": 0.25}
ARCHS = "transformer,transformer_nosa,hc_gaussian_shx,aan_plus_avg"


@pytest.mark.parametrize("size", ["tiny", "base"])
def test_every_family_is_a_registered_preset(size):
    archs = [resolve(name, size) for name in FAMILIES]
    assert len(set(archs)) == len(FAMILIES)
    assert archs[0] == f"posnet_transformer_{size}"


def _rows(output):
    rows = [line.strip("|").split("|") for line in output.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    return [dict(zip((h.strip() for h in header), (c.strip() for c in row))) for row in body]


@pytest.fixture
def fake_clock(monkeypatch):
    """training_step's clock advances STEP_SECONDS[arch] per step, and only then."""
    now = [0.0]
    monkeypatch.setattr(training_step, "time", types.SimpleNamespace(perf_counter=lambda: now[0],
                                                                     process_time=lambda: now[0]))
    step = training_step.TrainingStep.__call__

    def charged(self, batch=None):
        step(self, batch)
        now[0] += STEP_SECONDS[self.arch]

    monkeypatch.setattr(training_step.TrainingStep, "__call__", charged)


def _quick_table(archs=ARCHS):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_speed.main(["--quick", "--threads", "1", "--archs", archs])
    return out.getvalue()


def test_quick_cpu_table_reads_the_clock_and_the_arithmetic(fake_clock):
    text = _quick_table()
    assert text.startswith("device: CPU")
    rows = {row["arch"]: row for row in _rows(text)}
    assert list(rows) == list(STEP_SECONDS)
    tokens = 4 * 8  # --quick: 4 sentences of 8 tokens
    transformer = STEP_SECONDS["posnet_transformer_tiny"]
    for arch, seconds in STEP_SECONDS.items():
        row = rows[arch]
        assert float(row["tgt tok/s"]) == pytest.approx(tokens / seconds, abs=0.5)
        assert row["speed/Transformer"] == f"{transformer / seconds:.2f}x"
        assert row["speed/-SA"] == f"{STEP_SECONDS['transformer_nosa_tiny'] / seconds:.2f}x"
        ceiling = float(rows["posnet_transformer_tiny"]["MFLOP/token"]) / float(row["MFLOP/token"])
        assert float(row["ceiling"].rstrip("x")) == pytest.approx(ceiling, abs=0.02)
        assert float(row["share"].rstrip("%")) == pytest.approx(100 * transformer / seconds / ceiling, abs=2)
        assert row["peak MiB"] == "n/a" and row["max tokens"] == "n/a"  # CUDA only
    # No self-attention sub-layers: less arithmetic than the Transformer, by the attention's share.
    assert float(rows["transformer_nosa_tiny"]["ceiling"].rstrip("x")) > 1.2


def test_the_step_counts_forward_and_backward_flops_per_target_token():
    """The backward pass of a product costs twice its forward (the gradients of both operands; one where
    only one needs it), torch's CPU attention kernel 2.5 times (it recomputes the scores): a step costs
    between 2.5 and 3.5 times its forward."""
    step = training_step.TrainingStep("posnet_transformer_tiny", 4, 8, 64)
    src, lengths, prev, _ = step.batch
    forward, _ = count(step.model, src, lengths, prev)
    measured = training_step.measure("posnet_transformer_tiny", 4, 8, 64)
    assert measured["tokens"] == 32 and measured["params"] == step.params
    assert 2.5 * forward < measured["flops_per_token"] * 32 <= 3.5 * forward
    assert measured["saved_bytes"] > 0 and "step_s" not in measured


def test_timed_steps_are_medians_of_the_clock(fake_clock):
    result = training_step.measure("aan_plus_avg_tiny", 4, 8, 64, timed_steps=3, warmup=1)
    assert result["step_s"] == result["step_cpu_s"] == STEP_SECONDS["aan_plus_avg_tiny"]


@pytest.mark.parametrize("argv, message", [
    (["--quick", "--archs", "transformer,hc_gaussian"], "--ceiling transformer_nosa is not among --archs"),
    (["--quick", "--precision", "amp", "--device", "cpu"], "--precision amp needs --device cuda"),
])
def test_bad_options_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit):
        train_speed.parse_args(argv)
    assert message in capsys.readouterr().err


def test_an_unknown_arch_names_the_flag():
    with pytest.raises(SystemExit, match="--archs no_such_mixer: no preset no_such_mixer_tiny"):
        resolve("no_such_mixer", "tiny")


def test_max_tokens_search_caps_the_memory_of_the_device_index_and_restores_it(monkeypatch):
    """The max-tokens search on a step placed on plain "cuda" (no index, as TrainingStep makes it): the memory
    fraction is set on the current device's index (torch refuses a device without one, as a run on a GPU
    showed), the search finds the largest batch that fits, and the fraction is restored afterwards."""
    import torch

    fractions = []

    def set_fraction(fraction, device):
        if not isinstance(device, int):  # torch's own check: a torch.device("cuda") has no index
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        fractions.append((fraction, device))

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(
        total_memory=64 * 2 ** 30))
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", set_fraction)
    monkeypatch.setattr(train_speed, "fits", lambda step, sentences: sentences <= 45)
    step = types.SimpleNamespace(device=torch.device("cuda"))
    assert train_speed.max_sentences(step, 16 * 2 ** 30) == 45
    assert fractions == [(0.25, 3), (1.0, 3)]
