"""benchmark/ctranslate2_relative.py: Shaw-relative and T5-bias models converted to CTranslate2 score a translation
as fairseq does (teacher-forced and step by step), the T5 bucketings CTranslate2 rounds otherwise are refused with
the distance, and every other model of the kind is refused with its reason. Skipped, with the reason, without
ctranslate2 (requirements/ctranslate2.txt; setup.sh installs it)."""
import os
import types

import numpy as np
import pytest
import torch

from posnet_fairseq.benchmark import decode_models, decode_speed
from posnet_fairseq.benchmark import ctranslate2_decoding as ct2

pytest.importorskip("ctranslate2", reason=ct2.missing())

from posnet_fairseq.benchmark import ctranslate2_relative as relative  # noqa: E402  (needs ctranslate2)
from posnet_fairseq.mixers import t5_bias  # noqa: E402
from test_decode_speed import _decoded  # noqa: E402

SENTENCES = 8
# Each scheme at the sites its presets use (every self-attention), with its table layouts and a clipping
# distance or bucket range shorter than the sentences below.
MODELS = {
    "shaw-per-head": ("shaw_transformer_tiny", []),
    "shaw-per-head-values-k3": ("shaw_transformer_tiny", ["--relative-values", "--relative-max-distance", "3"]),
    "shaw-shared": ("shaw_transformer_tiny", ["--relative-embeddings", "shared"]),
    "shaw-shared-values-k2": ("shaw_transformer_tiny", ["--relative-embeddings", "shared", "--relative-values",
                                                        "--relative-max-distance", "2"]),
    "relattn": ("relattn_transformer_tiny", ["--relative-max-distance", "4"]),
    "t5": ("t5bias_transformer_tiny", []),
    "t5-short": ("t5bias_transformer_tiny", ["--t5-bias-buckets", "8", "--t5-bias-max-distance", "6"]),
}
LONG = 140  # tokens: past the T5 presets' max distance (128), so every bucket of both sides is used


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    decode_speed.quiet()
    return decode_models.synthetic_data_bin(str(tmp_path_factory.mktemp("ct2rel")), SENTENCES, train=200)


def _position_terms_enlarged(model):
    """Scales the relative tables so that a wrong distance, slot or bucket moves a score by far more than 1e-4
    (random tables at their initial scale change the logits only a little)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "relative_" in name or "t5_bias" in name:
                param.mul_(8.0)


def _converted(data_bin, arch, flags):
    model, cfg = decode_models.random_model(data_bin, arch, list(flags))
    _position_terms_enlarged(model)
    path = os.path.join(os.path.dirname(data_bin), f"{arch}{''.join(flags)}.pt")
    decode_models.save_checkpoint(model, cfg, path)
    model_dir = path[:-3] + ".ct2"
    why = ct2.conversion_error(path, data_bin, model_dir)
    return model.eval(), model_dir, why


def _fairseq_logits(model, source, target):
    """fairseq's teacher-forced output logits (T + 1 x V) for ``target`` after ``source`` (token strings)."""
    d = model.decoder.dictionary
    src = torch.tensor([[d.index(w) for w in source] + [d.eos()]])
    prev = torch.tensor([[d.eos()] + [d.index(w) for w in target]])
    with torch.no_grad():
        return model(src, torch.tensor([src.size(1)]), prev)[0][0]


def _long_pair(data_bin):
    words = [w for sentence in ct2.source_sentences(data_bin) for w in sentence]
    return (words * LONG)[:LONG], (words[::-1] * LONG)[:LONG]


@pytest.mark.parametrize("name", MODELS)
def test_the_converted_model_scores_a_translation_as_fairseq_does(data_bin, name):
    import ctranslate2

    model, model_dir, why = _converted(data_bin, *MODELS[name])
    assert why is None, why
    source, target = _long_pair(data_bin)
    scored = ctranslate2.Translator(model_dir, device="cpu", compute_type="float32").score_batch(
        [source], [target])[0].log_probs  # every target token, then EOS
    d = model.decoder.dictionary
    gold = torch.tensor([d.index(w) for w in target] + [d.eos()])
    expected = torch.log_softmax(_fairseq_logits(model, source, target), -1).gather(-1, gold[:, None])[:, 0]
    assert len(scored) == LONG + 1
    torch.testing.assert_close(torch.tensor(scored), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["shaw-per-head-values-k3", "relattn", "t5-short"])
def test_step_by_step_decoding_gives_fairseq_logits(data_bin, name):
    """CTranslate2's cached decoding (one query per step, positions offset by the cache) against fairseq's
    teacher-forced pass over the greedy hypothesis: the logits of every word at every step."""
    import ctranslate2

    model, model_dir, why = _converted(data_bin, *MODELS[name])
    assert why is None, why
    source = ct2.source_sentences(data_bin)[0]
    result = ctranslate2.Translator(model_dir, device="cpu").translate_batch(
        [source], beam_size=1, max_decoding_length=12, return_logits_vocab=True)[0]
    steps = torch.tensor(np.stack([np.asarray(step) for step in result.logits[0]]))
    assert steps.size(0) >= 6  # steps decoded, the last one EOS's when it ended the hypothesis
    words = model.decoder.dictionary.nspecial  # CTranslate2 masks EOS at the first step and the padding
    expected = _fairseq_logits(model, source, result.hypotheses[0])[: steps.size(0)]
    torch.testing.assert_close(steps[:, words:], expected[:, words:], atol=1e-4, rtol=0)


def test_the_preset_buckets_are_ctranslate2s():
    for buckets, max_distance in ((32, 128), (8, 6)):
        for bidirectional in (True, False):
            distances = torch.arange(-3 * max_distance, 3 * max_distance + 1)
            ours = t5_bias.t5_buckets(distances, bidirectional, buckets, max_distance).numpy()
            theirs = relative.ctranslate2_buckets(distances.numpy(), bidirectional, buckets, max_distance)
            assert (ours == theirs).all() and theirs.max() == buckets - 1, (buckets, max_distance, bidirectional)


def test_a_bucketing_ctranslate2_rounds_otherwise_is_refused_with_the_distance(data_bin):
    _, _, why = _converted(data_bin, "t5bias_transformer_tiny", ["--t5-bias-buckets", "48",
                                                                  "--t5-bias-max-distance", "81"])
    assert why == ("--t5-bias-buckets 48 --t5-bias-max-distance 81: CTranslate2 puts the decoder's distance -54 in "
                   "bucket 40, the plugin in 39 (float32 rounding at a bucket boundary): choose other values")


def test_ctranslate2_buckets_are_what_ctranslate2_computes_at_that_boundary(data_bin, monkeypatch):
    """The refused model converted anyway scores as fairseq does only with the emulated buckets (so the
    emulation is CTranslate2's, and the plugin's own buckets would have given other scores)."""
    import ctranslate2

    flags = ["--t5-bias-buckets", "48", "--t5-bias-max-distance", "81"]
    monkeypatch.setattr(relative, "_check_buckets", lambda bias, side: None)
    model, model_dir, why = _converted(data_bin, "t5bias_transformer_tiny", flags)
    assert why is None, why
    source, target = _long_pair(data_bin)
    scored = torch.tensor(ctranslate2.Translator(model_dir, device="cpu").score_batch([source], [target])[0].log_probs)
    d = model.decoder.dictionary
    gold = torch.tensor([d.index(w) for w in target] + [d.eos()])

    def fairseq_scores():
        return torch.log_softmax(_fairseq_logits(model, source, target), -1).gather(-1, gold[:, None])[:, 0]

    plugin = fairseq_scores()
    monkeypatch.setattr(t5_bias, "t5_buckets", lambda distances, *a: torch.from_numpy(
        relative.ctranslate2_buckets(distances.numpy(), *a).astype(np.int64)))
    emulated = fairseq_scores()
    torch.testing.assert_close(scored, emulated, atol=1e-4, rtol=0)
    assert (scored - plugin).abs().max() > 1e-3


@pytest.mark.parametrize("arch, flags, reason", [
    ("posnet_transformer_tiny", ["--encoder-self-mixer", "shaw", "--decoder-self-mixer", "shaw"],
     "Option --no-token-positional-embeddings is needed: CTranslate2 adds no absolute positions to a model whose "
     "self-attention is relative"),
    ("shaw_transformer_tiny", ["--decoder-self-mixer", "mha"],
     "the decoder's self-attention MultiheadAttention has no CTranslate2 counterpart here (--decoder-self-mixer: "
     "shaw, relattn, t5_bias in every layer)"),
    ("t5bias_transformer_tiny", ["--encoder-self-mixer", "t5_bias,t5_bias,mha"],
     "the encoder's self-attention MultiheadAttention has no CTranslate2 counterpart here (--encoder-self-mixer: "
     "shaw, relattn, t5_bias in every layer)"),
    ("shaw_transformer_tiny", ["--encoder-self-gating", "on"],
     "CTranslate2's Transformer has no counterpart of --encoder-self-gating on"),
], ids=["absolute-positions", "decoder-mha", "last-encoder-layer-mha", "gating"])
def test_what_has_no_counterpart_is_refused_with_the_reason(data_bin, arch, flags, reason):
    assert _converted(data_bin, arch, flags)[2] == reason


@pytest.mark.parametrize("compute_type", ct2.COMPUTE_TYPES)
def test_timed_decoding_of_a_converted_model_forces_the_length(data_bin, compute_type):
    _, model_dir, why = _converted(data_bin, *MODELS["shaw-per-head"])
    assert why is None, why
    result = ct2.Translator(model_dir, compute_type).translate_timed(ct2.source_sentences(data_bin), 7, beam=4,
                                                                     batch_size=4)
    assert result["tokens_per_hyp"] == 8 and result["rate"] > 0


def test_the_decoding_benchmark_has_rows_for_every_model_that_converts(tmp_path, monkeypatch):
    """decode_speed --ctranslate2: the Transformer's rows keep their names, the relative models get rows of their
    own with their parameters and arithmetic, and a model that does not convert says why and has none."""
    monkeypatch.setattr(decode_speed, "generate_timed", lambda data_bin, checkpoint, length, results_dir, **kw: {
        "rate": 4.0, "tokens_per_hyp": length + 1, "cpu_s": 2.0})  # fairseq's rows: only their presence matters
    output, rows = _decoded(["--size", "tiny", "--sentences", str(SENTENCES), "--rounds", "1", "--lengths", "6",
                             "--beam", "2", "--archs", "transformer,shaw_transformer,t5bias_transformer,aan_plus_avg",
                             "--ctranslate2", "--workdir", str(tmp_path)])
    converted = {"ctranslate2": "posnet_transformer_tiny", "shaw_transformer_tiny ctranslate2": "shaw_transformer_tiny",
                 "t5bias_transformer_tiny ctranslate2": "t5bias_transformer_tiny"}
    for prefix, arch in converted.items():
        for compute_type in ("fp32", "int8"):
            row = rows.pop(f"{prefix} {compute_type}")
            assert row["output tokens (incl. EOS)"] == "7" and float(row["sentences/s (median)"]) > 0
            assert (row["params"], row["MFLOP per token"]) == (rows[arch]["params"], rows[arch]["MFLOP per token"])
    assert not [row for row in rows if "ctranslate2" in row]
    assert "# CTranslate2: aan_plus_avg_tiny does not convert: fairseq's Transformer cannot load it" in output


def test_the_cost_report_has_rows_for_every_model_that_converts(data_bin, tmp_path):
    """posnet-compare's cost step: the first model's rows keep their names, a relative model that converts gets
    its own (a length beyond its positions recorded so), one that does not is logged, and results.md's line
    gives each row's rate and ratio to the first model."""
    from posnet_fairseq.compare import columns, cost, records

    checkpoints = {}
    for arch in ("posnet_transformer_tiny", "t5bias_transformer_tiny", "aan_plus_avg_tiny"):
        model, cfg = decode_models.random_model(data_bin, arch, [])
        checkpoints[arch] = str(tmp_path / f"{arch}.pt")
        decode_models.save_checkpoint(model, cfg, checkpoints[arch])
    limits = {arch: (1024, 1024) for arch in checkpoints}
    limits["t5bias_transformer_tiny"] = (1024, 6)  # 6 target positions: length 8 is beyond it
    log = []
    converted = cost.ctranslate2_decoding(checkpoints, limits, data_bin, [4, 8], 1, str(tmp_path / "ct2"),
                                          ("src", "tgt"), 2, 4, log.append)
    assert set(converted) == {"ctranslate2 fp32", "ctranslate2 int8", "t5bias_transformer_tiny ctranslate2 fp32",
                              "t5bias_transformer_tiny ctranslate2 int8"}
    for row, per in converted.items():
        assert per[4]["tokens_per_hyp"] == 5 and per[4]["rate"] > 0
        assert per[8] == {"beyond": 6} if row.startswith("t5bias") else per[8]["tokens_per_hyp"] == 9
    refused = "cost: no CTranslate2 rows for aan_plus_avg_tiny (it does not convert: "
    assert any(line.startswith(refused) for line in log)
    read = records.Cost.read({"training_steps": {}, "parameters": {}, "ctranslate2": converted, "decoding": {
        "posnet_transformer_tiny": {"4": {"rate": 2.0, "cpu_s": 1.0}, "8": {"rate": 1.0, "cpu_s": 2.0}}}})
    view = types.SimpleNamespace(cost=read, base="posnet_transformer_tiny", lengths=[4, 8])
    (line,) = columns._ctranslate2(view, [])
    rate = converted["t5bias_transformer_tiny ctranslate2 int8"][4]["rate"]
    assert f"t5bias_transformer_tiny ctranslate2 int8 L=4: {rate:.1f} sent/s ({rate / 2.0:.2f})" in line
    assert "t5bias_transformer_tiny ctranslate2 int8 L=8: beyond its 6 positions" in line
