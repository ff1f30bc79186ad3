"""position_augmentation/ (SHAPE, randomized positions) and how the model uses them: the drawn positions are
shifted/sorted as the papers say, in training only; at test time they are exact, so a model with the flags
decodes incrementally as it does teacher-forced."""
import glob
import os
import re
import shutil

import pytest
import torch
from fairseq import checkpoint_utils, options
from fairseq.modules import SinusoidalPositionalEmbedding

from fairseq_testing import (PLUGIN_DIR, build_model, check_beam_reordering, check_padding_invariance,
                             decode_incrementally, random_batch, run_cli, train_and_generate,
                             write_synthetic_data_bin)
from posnet_fairseq.data.length_ratio import length_ratio
from posnet_fairseq.mixers.attention import real_positions
from posnet_fairseq.position_augmentation import randomized_positions, shape

BOTH = ["--encoder-position-augmentation", "{0}", "--decoder-position-augmentation", "{0}",
        "--shape-max-offset", "6", "--randomized-positions-range", "40"]


def flags_for(method, *extra):
    return [f.format(method) for f in BOTH] + list(extra)


def left_padded(lengths):
    width = max(lengths)
    pad = torch.tensor([[c < width - n for c in range(width)] for n in lengths])
    return real_positions(pad, len(lengths), width, "cpu"), pad


def test_shape_adds_one_offset_per_sentence_within_0_to_k():
    positions, pad = left_padded([5, 3, 7] * 40)
    torch.manual_seed(0)
    moved = shape.shifted(positions, pad, 4)
    offsets = (moved - positions).masked_fill(pad, -1).max(dim=1).values
    for row, k in enumerate(offsets.tolist()):
        real = ~pad[row]
        assert torch.equal(moved[row, real], positions[row, real] + k)  # one offset for the whole sentence
        assert not moved[row, pad[row]].any()  # pads stay at 0
    assert set(offsets.tolist()) == {0, 1, 2, 3, 4}  # every offset of 0..K is drawn, none beyond


def test_randomized_positions_are_sorted_distinct_and_uniform_over_the_range():
    positions, pad = left_padded([5, 2, 8] * 400)
    torch.manual_seed(0)
    drawn = randomized_positions.sampled(positions, pad, 10)
    counts = torch.zeros(10)
    for row in range(drawn.size(0)):
        real = drawn[row, ~pad[row]]
        assert (real[1:] > real[:-1]).all() and real.min() >= 0 and real.max() < 10  # sorted, distinct, in [0, L)
        counts += torch.bincount(real, minlength=10)
    # A uniform n-subset holds each of the L values with probability n / L: 400 * (5 + 2 + 8) / 10 = 600 each.
    assert (counts - 600).abs().max() < 100, counts


def test_randomized_range_shorter_than_a_sentence_names_the_flag():
    positions, pad = left_padded([12])
    with pytest.raises(ValueError, match="--randomized-positions-range 10: a training batch holds a sentence of 12"):
        randomized_positions.sampled(positions, pad, 10)


@pytest.mark.parametrize("arch,extra", [
    ("posnet_transformer_tiny", []),  # sinusoidal
    ("posnet_transformer_tiny", ["--encoder-learned-pos", "--decoder-learned-pos"]),
    ("rope_transformer_tiny", []),
    ("rope_transformer_tiny", ["--decoder-self-mixer", "xpos"]),
])
@pytest.mark.parametrize("method", ["shape", "randomized"])
def test_at_test_time_positions_are_exact_and_decoding_equals_teacher_forcing(arch, extra, method):
    plain, task = build_model(extra, arch=arch)
    model, _ = build_model(flags_for(method, *extra), arch=arch)
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4, 9], [9, 3, 6])
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        torch.testing.assert_close(out, plain(src, lengths, prev)[0], atol=0, rtol=0)  # the same weights, same use
    torch.testing.assert_close(decode_incrementally(model, src, lengths, prev)[0], out[0], atol=1e-5, rtol=0)


def drawn_positions(model, side, src, lengths, prev):
    """The positions a side used in one pass (drawn in training, spread at test time), read while its first
    layer runs."""
    seen = {}
    host = getattr(model, side)

    def read(*_):
        seen["positions"] = host.forward_context.positions

    hook = host.layers[0].register_forward_pre_hook(read)
    with torch.no_grad():
        model(src, lengths, prev)
    hook.remove()
    return seen["positions"]


@pytest.mark.parametrize("method", ["shape", "randomized"])
def test_in_training_each_side_draws_positions_once_per_pass(method):
    model, task = build_model(flags_for(method))
    model.train()
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4, 9], [9, 3, 6])
    torch.manual_seed(3)
    enc = drawn_positions(model, "encoder", src, lengths, prev)
    dec = drawn_positions(model, "decoder", src, lengths, prev)
    for tokens, drawn in ((src, enc), (prev, dec)):
        pad = tokens.eq(task.source_dictionary.pad())
        plain = real_positions(pad, *tokens.shape, "cpu")
        assert not torch.equal(drawn, plain)
        for row in range(tokens.size(0)):
            real, base = drawn[row, ~pad[row]], plain[row, ~pad[row]]
            if method == "shape":
                assert len(set((real - base).tolist())) == 1 and 0 <= (real - base)[0] <= 6
            else:
                assert (real[1:] > real[:-1]).all() and real.max() < 40
    # The sinusoidal embeddings are those of the drawn positions: the encoder's input is the embedding table
    # at padding_idx + 1 + p.
    embeds = {}
    model.encoder.embed_positions.register_forward_hook(lambda m, a, out: embeds.update(out=out))
    torch.manual_seed(3)
    drawn = drawn_positions(model, "encoder", src, lengths, prev)
    pad_idx = task.source_dictionary.pad()
    table = SinusoidalPositionalEmbedding.get_embedding(pad_idx + 1 + 60, 16, pad_idx)
    index = (drawn + pad_idx + 1).masked_fill(src.eq(pad_idx), pad_idx)
    torch.testing.assert_close(embeds["out"], table[index], atol=1e-6, rtol=0)


def test_the_same_seed_draws_the_same_positions():
    model, task = build_model(flags_for("randomized"))
    model.train()
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], [9, 3])
    outs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        with torch.no_grad():
            outs.append(model(src, lengths, prev)[0])
    assert torch.equal(outs[0], outs[1]) and not torch.equal(outs[0], outs[2])


def test_shape_leaves_rope_unchanged_and_randomized_positions_do_not():
    """RoPE's logits depend on position differences only (RoFormer Eq. 16): one shift per sentence changes
    nothing (to float rounding); sorted random positions change the distances."""
    plain, task = build_model([], arch="rope_transformer_tiny")
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], [9, 3])
    real = prev.ne(task.source_dictionary.pad())  # (a pad query's output is masked everywhere: not compared)
    with torch.no_grad():
        reference = plain.train()(src, lengths, prev)[0][real]  # dropout is 0: training changes only the positions
        for method, same in (("shape", True), ("randomized", False)):
            model, _ = build_model(flags_for(method), arch="rope_transformer_tiny")
            torch.manual_seed(0)
            out = model.train()(src, lengths, prev)[0][real]
            assert torch.allclose(out, reference, atol=1e-5) == same, method


def test_a_side_with_nothing_to_augment_is_refused():
    with pytest.raises(ValueError, match="--encoder-position-augmentation shape: the encoder has neither token "
                                         "position embeddings nor a rotary mixer"):
        build_model(["--encoder-position-augmentation", "shape"], arch="alibi_transformer_tiny")


def test_a_range_beyond_the_learned_table_names_both_flags():
    with pytest.raises(ValueError, match="--randomized-positions-range 64: the learned position embeddings have 30 "
                                         r"positions \(--max-source-positions\)"):
        build_model(["--encoder-position-augmentation", "randomized", "--randomized-positions-range", "64",
                     "--encoder-learned-pos", "--max-source-positions", "30"])


def test_shape_past_the_learned_table_names_the_flags_in_training():
    model, task = build_model(["--decoder-position-augmentation", "shape", "--shape-max-offset", "8",
                               "--decoder-learned-pos", "--max-target-positions", "12"])
    src, lengths, prev = random_batch(task.source_dictionary, [3], [6])
    with pytest.raises(ValueError, match="--decoder-position-augmentation shape: positions up to 14 .* "
                                         r"\(--max-target-positions\); lower --shape-max-offset"):
        model.train()(src, lengths, prev)


def test_activation_checkpointing_is_refused():
    with pytest.raises(ValueError, match="--decoder-position-augmentation shape: not with --checkpoint-activations"):
        build_model(["--decoder-position-augmentation", "shape", "--checkpoint-activations"])


def test_spread_test_positions_are_the_expected_positions_of_a_draw():
    """--randomized-test-positions spread: p_i = round((i + 1)(L + 1)/(n + 1)) - 1, the mean of the i-th smallest
    of a uniform n-subset of 0..L-1 (checked against draws); a decoder target longer than its n goes on past
    L - 1 with the same spacing."""
    positions, pad = left_padded([5, 3])
    spread = randomized_positions.spread(positions, pad, torch.tensor([5, 3]), 40)
    assert spread[0].tolist() == [6, 13, 19, 26, 33]  # 41/6 = 6.83 apart
    assert spread[1].tolist() == [0, 0, 9, 19, 30]  # left pads at 0; 41/4 = 10.25 apart (20.5 rounds to even)
    torch.manual_seed(0)
    many, many_pad = left_padded([5] * 4000)
    drawn = randomized_positions.sampled(many, many_pad, 40).double().mean(0)
    assert (drawn - spread[0]).abs().max() < 0.5, drawn
    longer = randomized_positions.spread(torch.arange(8).unsqueeze(0), None, torch.tensor([5]), 40)
    assert longer[0, 4:].tolist() == [33, 40, 47, 54]


@pytest.mark.parametrize("range_", [40, 256])
def test_the_spread_bound_is_one_more_than_the_largest_spread_position(range_):
    """For every width up to 3L and every shortest length, ties of the rounding included."""
    for width in range(1, 3 * range_, 7):
        for shortest in range(1, 3 * range_, 5):
            largest = randomized_positions.spread(torch.tensor([[width - 1]]), None, torch.tensor([shortest]), range_)
            assert randomized_positions.spread_bound(width, shortest, range_) == int(largest) + 1, (width, shortest)


# Spread test positions; the decoder's for the target length gamma = 0.5 leads to expect.
SPREAD = ["--randomized-test-positions", "spread", "--length-ratio", "0.5"]


def test_the_decoder_spreads_its_positions_for_the_target_length_its_source_leads_to_expect():
    model, task = build_model(flags_for("randomized", *SPREAD))
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], [5, 5])  # + EOS: 8 and 5 source tokens
    expected = {"encoder": randomized_positions.spread(*left_padded([8, 5]), torch.tensor([8, 5]), 40),
                # (8 - 1) / 0.5 + 1 = 15 and (5 - 1) / 0.5 + 1 = 9 target tokens; the targets are not padded
                "decoder": randomized_positions.spread(torch.arange(6).expand(2, 6), None, torch.tensor([15, 9]), 40)}
    for side, positions in expected.items():
        assert torch.equal(drawn_positions(model, side, src, lengths, prev), positions), side


def test_spread_decoding_reads_the_device_once_per_batch_not_once_per_step(monkeypatch):
    """The spread positions' bound (the table a position embedding needs) is known on the host: 10 decoding
    steps read the device once more than with plain positions (the expected lengths, at the first step)."""
    src, lengths, prev = random_batch(build_model()[1].source_dictionary, [7, 4], [9, 9])
    reads = []

    def counted(read):
        return lambda self, *args: reads.append(1) or read(self, *args)

    for name in ("__int__", "item", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counted(getattr(torch.Tensor, name)))
    counts = {}
    for test_positions in ("plain", "spread"):
        model, _ = build_model(flags_for("randomized", "--randomized-test-positions", test_positions,
                                         "--length-ratio", "0.5"))
        reads.clear()
        decode_incrementally(model, src, lengths, prev)
        counts[test_positions] = len(reads)
    assert counts["spread"] == counts["plain"] + 1, counts


def test_spread_without_a_length_ratio_or_data_names_the_flag():
    with pytest.raises(ValueError, match="pass --length-ratio GAMMA"):
        build_model(flags_for("randomized", "--randomized-test-positions", "spread"))


def test_a_randomized_decoder_keeps_the_training_length_ratio_so_it_spreads_without_the_training_data(tmp_path):
    """Trained with plain test positions, the checkpoint stores gamma; spread positions asked for at generation
    (--model-overrides) then need no training split."""
    from fairseq_cli import generate

    data_bin = write_synthetic_data_bin(str(tmp_path))
    checkpoint, _ = train_and_generate(data_bin, str(tmp_path / "ckpt"), "posnet_transformer_tiny",
                                       extra=["--decoder-position-augmentation", "randomized",
                                              "--randomized-positions-range", "80"])
    stored = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)["cfg"]["model"].length_ratio
    assert stored == pytest.approx(length_ratio(data_bin, "src", "tgt")) and stored != 1.0
    test_only = tmp_path / "test-only"
    test_only.mkdir()
    for name in glob.glob(os.path.join(data_bin, "dict.*")) + glob.glob(os.path.join(data_bin, "test.*")):
        shutil.copy(name, test_only)
    out = run_cli(generate.main, [
        str(test_only), "--user-dir", PLUGIN_DIR, "--path", checkpoint, "--beam", "4", "--batch-size", "8",
        "--gen-subset", "test", "--max-len-b", "20", "--num-workers", "0", "--required-batch-size-multiple", "1",
        "--model-overrides", "{'randomized_test_positions': 'spread'}"], options.get_generation_parser)
    hypotheses = re.findall(r"^H-(\d+)\t", out, flags=re.M)
    assert hypotheses and sorted(hypotheses) == sorted(re.findall(r"^S-(\d+)\t", out, flags=re.M))


@pytest.mark.parametrize("arch,extra", [
    ("posnet_transformer_tiny", []),  # sinusoidal
    ("posnet_transformer_tiny", ["--encoder-learned-pos", "--decoder-learned-pos"]),
    ("rope_transformer_tiny", []),
    ("rope_transformer_tiny", ["--decoder-self-mixer", "xpos"]),
])
def test_spread_test_positions_change_the_model_and_decoding_still_equals_teacher_forcing(arch, extra):
    """The same weights translate otherwise with spread positions (the decoder's spread for the length its
    source leads to expect, which beam search reorders with the rows); padding changes nothing, and incremental
    decoding matches teacher forcing, beams reordered or not."""
    plain, task = build_model(flags_for("randomized", *extra), arch=arch)
    model, _ = build_model(flags_for("randomized", *extra, *SPREAD), arch=arch)
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4, 9], [9, 3, 6])
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
        assert not torch.allclose(out, plain(src, lengths, prev)[0], atol=1e-3)
    torch.testing.assert_close(decode_incrementally(model, src, lengths, prev)[0], out[0], atol=1e-5, rtol=0)
    check_beam_reordering(model, task.source_dictionary, atol=1e-5)
    check_padding_invariance(model, task.source_dictionary, atol=1e-5)
