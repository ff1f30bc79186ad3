"""benchmark/ctranslate2_decoding.py: every family converts with CTranslate2's fairseq converter, or is refused
for the reason its declaration gives (``ctranslate2=`` in families.py), the converted Transformer scores as
fairseq does, and its timed decoding forces the length. Skipped, with the reason, without ctranslate2
(requirements/ctranslate2.txt; setup.sh installs it)."""
import os

import pytest
import torch

from posnet_fairseq import families
from posnet_fairseq.benchmark import ctranslate2_decoding as ct2
from posnet_fairseq.benchmark import decode_models, decode_speed

pytest.importorskip("ctranslate2", reason=ct2.missing())

SENTENCES = 8


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    decode_speed.quiet()
    return decode_models.synthetic_data_bin(str(tmp_path_factory.mktemp("ct2")), SENTENCES, train=200)


def _checkpoint(data_bin, arch, flags=()):
    model, cfg = decode_models.random_model(data_bin, arch, list(flags))
    path = os.path.join(os.path.dirname(data_bin), f"{arch}{''.join(flags)}.pt")
    decode_models.save_checkpoint(model, cfg, path)
    return model, path


@pytest.mark.parametrize("family", families.all_families(), ids=lambda family: family.prefix)
def test_every_family_converts_or_says_why(data_bin, family):
    """Its tiny preset converts where its declaration says so, and is refused for the declared reason where not
    (docs/benchmarks.md#ctranslate2-which-families-convert is generated from the same declarations)."""
    _, path = _checkpoint(data_bin, family.name("tiny"))
    outcome = ct2.conversion_error(path, data_bin, path[:-3] + ".ct2")
    if family.ctranslate2 == families.CONVERTS:
        assert outcome is None
    else:
        assert outcome is not None and outcome.startswith(family.ctranslate2.refusal), outcome


@pytest.mark.parametrize("positions", [[], ["--encoder-learned-pos", "--decoder-learned-pos"]],
                         ids=["sinusoidal", "learned"])
def test_the_converted_transformer_scores_a_translation_as_fairseq_does(data_bin, positions):
    import ctranslate2

    model, path = _checkpoint(data_bin, "posnet_transformer_tiny", positions)
    model_dir = path[:-3] + ".ct2"
    ct2.convert(path, data_bin, model_dir)
    source = ct2.source_sentences(data_bin)[0]
    d = model.decoder.dictionary
    target = source[::-1][:6]
    scored = ctranslate2.Translator(model_dir, device="cpu", compute_type="float32").score_batch(
        [source], [target])[0].log_probs  # every target token, then EOS
    src = torch.tensor([[d.index(w) for w in source] + [d.eos()]])
    prev = torch.tensor([[d.eos()] + [d.index(w) for w in target]])
    with torch.no_grad():
        logits = model.eval()(src, torch.tensor([src.size(1)]), prev)[0]
    gold = torch.tensor([d.index(w) for w in target] + [d.eos()])
    expected = torch.log_softmax(logits[0], -1).gather(-1, gold[:, None])[:, 0]
    torch.testing.assert_close(torch.tensor(scored), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("compute_type", ct2.COMPUTE_TYPES)
def test_timed_decoding_forces_every_hypothesis_to_the_length(data_bin, compute_type):
    _, path = _checkpoint(data_bin, "posnet_transformer_tiny")
    model_dir = path[:-3] + ".ct2"
    ct2.convert(path, data_bin, model_dir)
    sources = ct2.source_sentences(data_bin)
    assert len(sources) == SENTENCES and all(sources)
    result = ct2.Translator(model_dir, compute_type).translate_timed(sources, 7, beam=4, batch_size=4)
    assert result["tokens_per_hyp"] == 8 and result["rate"] > 0 and result["cpu_s"] > 0
