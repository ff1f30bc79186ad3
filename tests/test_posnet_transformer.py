"""The model family: mha-only equals fairseq's transformer; specs are validated
at build time with messages naming the flag; plugin loading and the fairseq
version guard."""
import importlib

import pytest
import torch
from fairseq.tasks.translation import TranslationTask

import posnet_fairseq
from fairseq_testing import (
    PLUGIN_DIR,
    TINY_DIMS,
    build_model,
    dummy_dictionary,
    parse_train_args,
    random_batch,
)
from posnet_fairseq.compat import UnsupportedFairseqError, check_fairseq
from posnet_fairseq.mixers.registry import MIXERS, MixerEntry


def _fairseq_transformer(seed=1):
    args = parse_train_args(["--arch", "transformer", "--dropout", "0", *TINY_DIMS])
    d = dummy_dictionary()
    torch.manual_seed(seed)
    return TranslationTask(args, d, d).build_model(args).eval()


def test_mha_everywhere_is_fairseqs_transformer():
    ours, task = build_model(arch="posnet_transformer_base")
    theirs = _fairseq_transformer()
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert list(ours_state) == list(theirs_state)
    for key in theirs_state:
        assert torch.equal(ours_state[key], theirs_state[key]), key
    tokens, lengths, prev = random_batch(task.source_dictionary, [6, 3], [5, 2])
    with torch.no_grad():
        assert torch.equal(ours(tokens, lengths, prev)[0], theirs(tokens, lengths, prev)[0])


def test_size_presets_follow_fairseq():
    for arch, (dim, ffn, heads, dropout) in {
        "posnet_transformer_small": (512, 1024, 8, 0.3),  # the PosNet paper's Small: base, FFN 1024, dropout 0.3
        "posnet_transformer_base": (512, 2048, 8, 0.1),
        "posnet_transformer_big": (1024, 4096, 16, 0.3),
    }.items():
        args = parse_train_args(["--arch", arch])
        got = (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads, args.dropout)
        assert got == (dim, ffn, heads, dropout), arch


def test_unknown_mixer_names_the_flag_and_choices():
    with pytest.raises(ValueError, match=r"--decoder-self-mixer nosuch: unknown mixer; choose from .*mha"):
        build_model(["--decoder-self-mixer", "nosuch"])


def test_mixer_at_a_site_it_cannot_serve(monkeypatch):
    monkeypatch.setitem(MIXERS, "selfonly", MixerEntry("selfonly", MIXERS["mha"].build, frozenset({"encoder_self"})))
    with pytest.raises(ValueError, match=r"--cross-mixer selfonly: mixer 'selfonly' cannot serve the cross site"):
        build_model(["--cross-mixer", "selfonly"])


def test_per_layer_spec_must_match_the_layer_count():
    with pytest.raises(ValueError, match=r"--encoder-self-mixer mha,mha,mha: gives 3 per-layer values but the model has 2 layers"):
        build_model(["--encoder-self-mixer", "mha,mha,mha"])


def test_per_layer_spec_places_mixers():
    model, _ = build_model(["--encoder-self-mixer", "none,mha", "--cross-mixer", "none,mha"])
    assert type(model.encoder.layers[0].self_attn).__name__ == "NoMixer"
    assert type(model.encoder.layers[1].self_attn).__name__ == "MultiheadAttention"
    assert model.decoder.layers[0].encoder_attn is None
    assert model.decoder.layers[1].encoder_attn is not None


def test_cross_self_attention_needs_mha():
    with pytest.raises(ValueError, match="--cross-self-attention needs --decoder-self-mixer mha"):
        build_model(["--cross-self-attention", "--decoder-self-mixer", "none"])


def test_removed_sublayers_pass_the_input_through():
    """-SA and -FF: the layer without a sub-layer is exactly the remaining sub-layers."""
    model, _ = build_model(["--encoder-self-mixer", "none", "--no-encoder-ffn"])
    layer = model.encoder.layers[0]
    assert sum(p.numel() for p in layer.parameters()) == 0
    x = torch.randn(5, 2, 16)
    torch.testing.assert_close(layer(x, None), x)


def test_length_ratio_is_computed_once_and_kept(monkeypatch, tmp_path):
    """A mixer that needs gamma gets it from the training data at build time;
    the value is written into args (hence the checkpoint) and not recomputed."""
    from fairseq_testing import write_synthetic_data_bin
    from posnet_fairseq.data.length_ratio import length_ratio

    data_bin = write_synthetic_data_bin(str(tmp_path), train=60, valid=5, test=5)
    monkeypatch.setitem(
        MIXERS, "gamma_mha", MixerEntry("gamma_mha", MIXERS["mha"].build, frozenset({"cross"}), uses_length_ratio=True)
    )
    args = parse_train_args(["--arch", "posnet_transformer_tiny", "--cross-mixer", "gamma_mha", *TINY_DIMS])
    args.data = data_bin
    task = TranslationTask.setup_task(args)
    task.build_model(args)
    expected = length_ratio(data_bin, "src", "tgt")
    assert args.length_ratio == pytest.approx(expected)
    src = open(tmp_path / "raw" / "train.src").read().split()
    tgt = open(tmp_path / "raw" / "train.tgt").read().split()
    assert expected == pytest.approx(len(src) / len(tgt))  # word level: no BPE in this corpus
    args.data = "/nonexistent"  # a second build (e.g. at load time) must not need the data
    TranslationTask(args, task.src_dict, task.tgt_dict).build_model(args)
    assert args.length_ratio == pytest.approx(expected)


def test_plugin_imports_twice_and_through_user_dir():
    from argparse import Namespace

    from fairseq import utils

    assert importlib.import_module("posnet_fairseq") is posnet_fairseq
    for _ in range(2):  # fairseq-train imports --user-dir again after `import posnet_fairseq`
        utils.import_user_module(Namespace(user_dir=PLUGIN_DIR))
    assert posnet_fairseq.__file__.startswith(PLUGIN_DIR)


def test_fairseq_0_12_2_encoder_layer_is_refused():
    class BetterTransformerLayer:  # the shape of fairseq 0.12.2's TransformerEncoderLayerBase.__init__
        def __init__(self, cfg):
            self.in_proj_weight = torch.cat([self.self_attn.q_proj.weight, self.self_attn.k_proj.weight])

    with pytest.raises(UnsupportedFairseqError, match="fairseq-fixed==0.12.3.1"):
        check_fairseq(BetterTransformerLayer)
    check_fairseq()  # the installed fairseq passes


def test_console_wrappers_add_the_user_dir_once():
    from posnet_fairseq.cli.fairseq_wrappers import _keeping_every_sentence, _with_user_dir

    assert _with_user_dir(["data"]) == ["data", "--user-dir", PLUGIN_DIR]
    assert _with_user_dir(["data", "--user-dir", "x"]) == ["data", "--user-dir", "x"]
    assert _keeping_every_sentence(["data"]) == ["data", "--required-batch-size-multiple", "1"]
    assert _keeping_every_sentence(["--required-batch-size-multiple=8"]) == ["--required-batch-size-multiple=8"]


@pytest.mark.parametrize("arch", ["posnet_transformer_tiny", "aan_plus_avg_tiny", "hc_gaussian_tiny"])
def test_beam_search_lists_the_reordering_modules_once_per_search(arch, monkeypatch):
    """The decoder finds the modules that reorder decoding state once per search, not at every step, and a search
    translates exactly as with fairseq's walk over every module at every step."""
    from fairseq.models.fairseq_incremental_decoder import FairseqIncrementalDecoder
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_testing import random_sentences, src_batch

    model, task = build_model(arch=arch)
    d = task.target_dictionary
    tokens, lengths = src_batch(random_sentences([6, 3, 5], torch.Generator().manual_seed(2), d), d.pad(), d.eos())
    sample = {"net_input": {"src_tokens": tokens, "src_lengths": lengths}}
    decoder, walks = model.decoder, []
    every_module = decoder.modules

    def counted():
        walks.append(1)
        return every_module()

    monkeypatch.setattr(decoder, "modules", counted)
    search = SequenceGenerator([model], d, beam_size=3, max_len_b=7)
    with torch.no_grad():
        listed = search(sample)
        assert len(walks) == 1  # 7 steps, reordered after each
        assert decoder._reordering == [m for m in every_module() if hasattr(m, "reorder_incremental_state")]
        walks.clear()
        again = search(sample)
        assert len(walks) == 1  # listed anew for the next search
        monkeypatch.setattr(type(decoder), "reorder_incremental_state_scripting",
                            FairseqIncrementalDecoder.reorder_incremental_state_scripting)
        walked = search(sample)
    for hypotheses in (again, walked):
        for a, b in zip(listed, hypotheses):
            assert [h["tokens"].tolist() for h in a] == [h["tokens"].tolist() for h in b]
            assert torch.equal(torch.stack([h["score"] for h in a]), torch.stack([h["score"] for h in b]))
