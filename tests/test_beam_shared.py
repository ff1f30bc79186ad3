"""models/beam_shared.py: in beam search the encoder side is kept once per sentence, and the translations are
those of the per-hypothesis path (``fairseq-generate --no-beamable-mm``)."""
import copy

import pytest
import torch
from fairseq.models.transformer import TransformerEncoderBase
from fairseq.modules import MultiheadAttention
from fairseq.sequence_generator import SequenceGenerator

import fairseq_testing as ft
from posnet_fairseq.models import beam_cross_attention, beam_shared, int8
from posnet_fairseq.models.beam_shared import expansion
from test_mixer_contract import INT8_ATOL

BEAM = 4
# Source lengths of the test batch: the longest (with EOS) is a length no other tensor dimension has.
SOURCES = [10, 3, 7, 5, 8]
ARCHS = {
    "transformer": "posnet_transformer_tiny",  # fairseq's cross attention in every layer
    "aan": "aan_plus_avg_tiny",
    "hc_sa": "hc_gaussian_tiny",
    "hc_all": "hc_gaussian_all_tiny",  # no fairseq attention at the cross site: only the encoder output is shared
    "shx": "hc_gaussian_shx_tiny",  # one learned cross head in the last layer, none elsewhere
    "rposnet": "rposnet_transformer_tiny",  # gated PosNet self-attention, constant-state decoding
}
# The EOS row of each untrained model's output projection scaled by this, so that its sentences finish at
# different steps of a search (the test checks that they do).
EOS_SCALE = {"hc_gaussian_all_tiny": 3.5}


def _models(arch):
    """The model with beam sharing and a copy without (as fairseq-generate --no-beamable-mm prepares it)."""
    flags = ["--length-ratio", "1.5"] if arch == "hc_gaussian_all_tiny" else []
    model, task = ft.build_model(flags, arch=arch)
    with torch.no_grad():
        model.decoder.output_projection.weight[task.target_dictionary.eos()] *= EOS_SCALE.get(arch, 3.0)
    per_hypothesis = copy.deepcopy(model)
    model.make_generation_fast_(beamable_mm_beam_size=BEAM)
    per_hypothesis.make_generation_fast_(beamable_mm_beam_size=None)
    return model, per_hypothesis, task.target_dictionary


def _sample(d):
    tokens, lengths = ft.src_batch(ft.random_sentences(SOURCES, torch.Generator().manual_seed(5), d), d.pad(), d.eos())
    return {"net_input": {"src_tokens": tokens, "src_lengths": lengths}}


def _cross_attentions(model):
    return [m for m in model.decoder.modules() if isinstance(m, MultiheadAttention) and m.encoder_decoder_attention]


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_beam_search_translates_as_the_per_hypothesis_path(arch, monkeypatch):
    """The same hypotheses and scores, with sentences finishing at different steps (their rows dropped from the
    batch mid-search); on both paths the encoder output is copied only to expand it and to drop finished
    sentences."""
    model, per_hypothesis, d = _models(ARCHS[arch])
    copies = []
    reorder = TransformerEncoderBase.reorder_encoder_out  # the copy the plugin's encoder makes or skips

    def counted(self, encoder_out, new_order):
        copies.append((encoder_out["encoder_out"][0].size(1), new_order.numel()))
        return reorder(self, encoder_out, new_order)

    monkeypatch.setattr(TransformerEncoderBase, "reorder_encoder_out", counted)
    with torch.no_grad():
        shared = SequenceGenerator([model], d, beam_size=BEAM, max_len_b=12)(_sample(d))
        rows_shared, copies[:] = list(copies), []
        plain = SequenceGenerator([per_hypothesis], d, beam_size=BEAM, max_len_b=12)(_sample(d))
    for a, b in zip(shared, plain):
        assert [h["tokens"].tolist() for h in a] == [h["tokens"].tolist() for h in b]
        torch.testing.assert_close(torch.stack([h["score"] for h in a]), torch.stack([h["score"] for h in b]),
                                   atol=1e-5, rtol=0)
    assert rows_shared[0] == (len(SOURCES), len(SOURCES) * BEAM)  # the expansion
    assert all(after < before for before, after in rows_shared[1:]), rows_shared  # only sentences dropped
    assert len(rows_shared) > 1  # sentences did finish mid-search
    assert copies == rows_shared  # the per-hypothesis cross attention too (--no-beamable-mm) skips the no-op copies
    if _cross_attentions(model):
        assert {m.beam_size for m in _cross_attentions(model)} == {BEAM}
    assert {m.beam_size for m in _cross_attentions(per_hypothesis)} <= {1}


def _steps(model, d, orders):
    """Decoder logits of beam-search-like steps: the encoder output expanded to BEAM hypotheses per sentence,
    then reordered before each step by ``orders`` (within sentences)."""
    sample = _sample(d)["net_input"]
    rows = len(SOURCES) * BEAM
    prev = torch.randint(d.nspecial, len(d), (rows, len(orders) + 1), generator=torch.Generator().manual_seed(6))
    prev[:, 0] = d.eos()
    logits, state = [], {}
    with torch.no_grad():
        encoder_out = model.encoder(**sample)
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.arange(rows) // BEAM)
        for t in range(prev.size(1)):
            if t:
                model.decoder.reorder_incremental_state_scripting(state, orders[t - 1])
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, orders[t - 1])
                prev = prev[orders[t - 1]]
            logits.append(model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)[0])
    return logits


@pytest.mark.parametrize("quantized", [False, True], ids=["fp32", "int8"])
def test_decoding_steps_equal_the_per_hypothesis_path(quantized):
    """Each step's logits, the hypotheses permuted within their sentences between steps: within float rounding
    in fp32, within the int8 contract's tolerance (test_mixer_contract.INT8_ATOL) with int8 linear layers."""
    model, per_hypothesis, d = _models(ARCHS["aan"])
    if quantized:
        model, per_hypothesis = (int8.quantize_(m, "all") for m in (model, per_hypothesis))
    g = torch.Generator().manual_seed(7)
    orders = [(torch.arange(len(SOURCES)).unsqueeze(1) * BEAM + torch.randint(BEAM, (len(SOURCES), BEAM), generator=g))
              .flatten() for _ in range(5)]
    for t, (a, b) in enumerate(zip(_steps(model, d, orders), _steps(per_hypothesis, d, orders))):
        torch.testing.assert_close(a, b, atol=INT8_ATOL if quantized else 1e-5, rtol=0, msg=lambda m: f"step {t}: {m}")


def test_a_step_copies_nothing_of_the_encoder_side():
    """After the expansion, a reorder within sentences returns the encoder output itself on both paths (it would
    copy equal rows onto each other; on 9592acc the per-hypothesis path copied it at every step), and no
    operator of a decoding step copies a tensor as long as the source; the shared cross attention caches one
    row per sentence, the per-hypothesis one a row per hypothesis."""
    model, per_hypothesis, d = _models(ARCHS["transformer"])
    source = max(SOURCES) + 1
    for name, m in (("shared", model), ("per hypothesis", per_hypothesis)):
        encoder_out = m.encoder(**_sample(d)["net_input"])
        rows = len(SOURCES) * BEAM
        encoder_out = m.encoder.reorder_encoder_out(encoder_out, torch.arange(rows) // BEAM)
        state, prev = {}, torch.full((rows, 1), d.eos())
        with torch.no_grad():
            m.decoder(prev, encoder_out=encoder_out, incremental_state=state)
            with torch.profiler.profile(record_shapes=True) as profiler:
                order = torch.arange(rows).flip(0).view(-1, BEAM).flip(0).flatten()  # within sentences
                m.decoder.reorder_incremental_state_scripting(state, order)
                reordered = m.encoder.reorder_encoder_out(encoder_out, order)
                m.decoder(torch.cat([prev, prev], 1), encoder_out=reordered, incremental_state=state)
        copies = sum(1 for e in profiler.events() if e.name == "aten::index_select"
                     and any(source in shape for shape in e.input_shapes if shape))
        assert reordered is encoder_out and copies == 0, name
        cached = {state[k][name].size(0) for k in state for name in ("prev_key", beam_cross_attention.VALUES)
                  if name in state[k] and state[k][name].size(2) == source}  # the cross keys or values: B x H x S x D_h
        assert cached == {len(SOURCES) if name == "shared" else rows}, name


def test_off_the_beamable_devices_the_cross_attention_stays_per_hypothesis(monkeypatch):
    """As on a GPU (not in BEAMABLE_DEVICES): a shared beam keeps the cross attention per hypothesis, caching a
    row per hypothesis, and still skips the encoder output's copies within sentences; the translations are the
    per-hypothesis path's."""
    monkeypatch.setattr(beam_shared, "BEAMABLE_DEVICES", ())
    model, per_hypothesis, d = _models(ARCHS["transformer"])
    with torch.no_grad():
        encoder_out = model.encoder(**_sample(d)["net_input"])
        rows = len(SOURCES) * BEAM
        expanded = model.encoder.reorder_encoder_out(encoder_out, torch.arange(rows) // BEAM)
        assert {m.beam_size for m in _cross_attentions(model)} == {1}
        assert model.encoder.reorder_encoder_out(expanded, torch.arange(rows).view(-1, BEAM).flip(1).flatten()) is expanded
        found = [SequenceGenerator([m], d, beam_size=BEAM, max_len_b=12)(_sample(d)) for m in (model, per_hypothesis)]
    for a, b in zip(*found):
        assert [h["tokens"].tolist() for h in a] == [h["tokens"].tolist() for h in b]
        assert torch.equal(torch.stack([h["score"] for h in a]), torch.stack([h["score"] for h in b]))


def test_a_later_generation_without_beam_is_per_hypothesis():
    """Every encoder forward puts the cross attention back to one row per hypothesis: a beam-1 search after a
    beam-4 one (for which SequenceGenerator sets no beam size) decodes as a fresh model does."""
    model, per_hypothesis, d = _models(ARCHS["transformer"])
    with torch.no_grad():
        SequenceGenerator([model], d, beam_size=BEAM, max_len_b=6)(_sample(d))
        greedy = [SequenceGenerator([m], d, beam_size=1, max_len_b=6)(_sample(d)) for m in (model, per_hypothesis)]
    assert {m.beam_size for m in _cross_attentions(model)} == {1}
    for a, b in zip(*greedy):
        assert a[0]["tokens"].tolist() == b[0]["tokens"].tolist()


@pytest.mark.parametrize("order, rows, beam", [
    ([0, 0, 0, 1, 1, 1], 2, 3),  # SequenceGenerator's expansion
    ([0, 1, 0, 1], 2, 1),  # repeated, but not in place
    ([0, 0, 1], 2, 1),  # not a whole number of rows each
    ([1, 0], 2, 1),  # a permutation of the rows
    ([0, 0, 1, 1, 1, 1], 3, 1),
])
def test_only_an_in_place_repetition_of_every_row_is_an_expansion(order, rows, beam):
    assert expansion(torch.tensor(order), rows) == beam
