"""tasks/concatenated_pairs.py and tasks/translation_concat.py: the joined examples' sizes, content, share and
determinism, batching by --max-tokens, and fairseq-train with --task translation_concat."""
import numpy as np
import pytest
import torch
from fairseq.data import Dictionary, LanguagePairDataset, data_utils

from fairseq_testing import train_and_generate, write_synthetic_data_bin
from posnet_fairseq.tasks.concatenated_pairs import ConcatenatedPairsDataset


def pair_dataset(n=60, seed=0):
    """n pairs of 1-9 word tokens plus EOS each side; token values tell the pairs apart."""
    d = Dictionary()
    for w in range(40):
        d.add_symbol(f"w{w}")
    g = torch.Generator().manual_seed(seed)
    src, tgt = [], []
    for _ in range(n):
        for side in (src, tgt):
            length = int(torch.randint(1, 10, (1,), generator=g))
            side.append(torch.cat([torch.randint(d.nspecial, len(d), (length,), generator=g),
                                   torch.tensor([d.eos()])]))
    return LanguagePairDataset(src, np.array([len(s) for s in src]), d, tgt, np.array([len(t) for t in tgt]), d)


def joined(pairs, members, side):
    parts = [pairs[int(i)][side] for i in members]
    return torch.cat([p[:-1] for p in parts[:-1]] + [parts[-1]])


def test_joined_examples_are_their_pairs_with_one_final_eos_and_sizes_that_say_so():
    pairs = pair_dataset()
    data = ConcatenatedPairsDataset(pairs, max_pairs=4, rate=0.5, seed=1)
    assert len(data) == 120  # 60 pairs and, at a share of 0.5, 60 joined examples
    eos = pairs.src_dict.eos()
    for index in range(len(data)):
        item = data[index]
        assert item["id"] == index
        assert (len(item["source"]), len(item["target"])) == data.size(index)
        assert data.num_tokens(index) == max(data.size(index))
        for side in ("source", "target"):
            assert item[side][-1] == eos and (item[side] == eos).sum() == 1  # the inner EOS are removed
    for row, (members, count) in enumerate(zip(data.members, data.counts)):
        used = members[:count]
        assert 2 <= count <= 4 and len(set(used.tolist())) == count  # 2..K distinct pairs
        for side in ("source", "target"):
            assert torch.equal(data[60 + row][side], joined(pairs, used, side))
    assert set(data.counts.tolist()) == {2, 3, 4}
    assert torch.equal(data[7]["source"], pairs[7]["source"])  # the pairs themselves come first, unchanged


@pytest.mark.parametrize("rate,joined_examples", [(0.0, 0), (0.25, 20), (0.75, 180)])
def test_the_rate_is_the_share_of_joined_examples(rate, joined_examples):
    data = ConcatenatedPairsDataset(pair_dataset(), max_pairs=3, rate=rate, seed=1)
    assert len(data) - 60 == joined_examples


def test_the_examples_depend_on_seed_and_epoch_only():
    pairs = pair_dataset()
    first = ConcatenatedPairsDataset(pairs, 3, 0.5, seed=1, epoch=1)
    again = ConcatenatedPairsDataset(pairs, 3, 0.5, seed=1, epoch=1)
    assert np.array_equal(first.members, again.members) and np.array_equal(first.counts, again.counts)
    assert not np.array_equal(first.members, ConcatenatedPairsDataset(pairs, 3, 0.5, seed=2, epoch=1).members)
    sizes = first.src_sizes.copy()
    first.set_epoch(2)  # fairseq's next epoch: new examples, new sizes
    assert not np.array_equal(first.members, again.members) and not np.array_equal(first.src_sizes, sizes)
    first.set_epoch(1)
    assert np.array_equal(first.members, again.members) and np.array_equal(first.src_sizes, sizes)
    assert not first.can_reuse_epoch_itr_across_epochs


def test_joined_examples_stay_within_the_position_limits():
    data = ConcatenatedPairsDataset(pair_dataset(), 6, 0.5, seed=1, max_source_positions=14, max_target_positions=12)
    assert data.src_sizes.max() <= 14 and data.tgt_sizes.max() <= 12
    assert (data.counts >= 2).all() and len(data.counts) > 0
    for row in range(len(data.counts)):
        assert len(data[60 + row]["source"]) <= 14


def test_batches_by_max_tokens_hold_the_joined_lengths():
    data = ConcatenatedPairsDataset(pair_dataset(), 4, 0.5, seed=1)
    with data_utils.numpy_seed(1):
        indices = data.ordered_indices()
    assert sorted(indices.tolist()) == list(range(len(data)))
    batches = data.batch_by_size(indices, max_tokens=60)
    assert sum(len(b) for b in batches) == len(data)
    for batch in batches:
        sample = data.collater([data[int(i)] for i in batch])
        assert sample["net_input"]["src_tokens"].numel() <= 60 and sample["target"].numel() <= 60
        assert sample["ntokens"] == sum(data.tgt_sizes[int(i)] for i in batch)


def test_fairseq_train_runs_the_task_and_sees_more_examples(tmp_path, monkeypatch):
    """Two short epochs of fairseq-train with --task translation_concat, then fairseq-generate from the
    checkpoint: an epoch holds the joined examples too, so it takes more updates than plain translation, and
    the second epoch draws its own examples."""
    epochs = []
    compose = ConcatenatedPairsDataset.set_epoch
    monkeypatch.setattr(ConcatenatedPairsDataset, "set_epoch", lambda self, e: (epochs.append(e), compose(self, e)))
    data_bin = write_synthetic_data_bin(str(tmp_path / "data"), train=60, valid=5, test=5, max_len=12)
    updates = {}
    for task in ("translation", "translation_concat"):
        concat = ["--concat-max-pairs", "3"] if task != "translation" else []
        checkpoint, out = train_and_generate(data_bin, str(tmp_path / task), "posnet_transformer_tiny",
                                             updates=1000, extra=["--task", task, "--max-epoch", "2", *concat])
        state = torch.load(checkpoint, weights_only=False)
        assert state["cfg"]["task"]["_name"] == task
        updates[task] = state["optimizer_history"][-1]["num_updates"]
        assert "H-" in out  # the checkpoint translates
    assert updates["translation_concat"] > updates["translation"]
    assert {1, 2} <= set(epochs)


@pytest.mark.parametrize("flags,message", [
    (["--concat-max-pairs", "1"], "--concat-max-pairs 1: must be at least 2"),
    (["--concat-rate", "1.0"], r"--concat-rate 1.0: the share of concatenated examples must be in \[0, 1\)"),
])
def test_bad_task_flags_are_refused_naming_them(tmp_path, flags, message):
    data_bin = write_synthetic_data_bin(str(tmp_path / "data"), train=10, valid=2, test=2)
    with pytest.raises(ValueError, match=message):
        train_and_generate(data_bin, str(tmp_path / "ckpt"), "posnet_transformer_tiny",
                           extra=["--task", "translation_concat", *flags])


class _Stop(Exception):
    """Ends a posnet-compare run once its models' training flags are known."""


def test_posnet_compare_concat_train_adds_the_task_flags_to_training_only(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from posnet_fairseq.cli import compare
    from posnet_fairseq.compare import data, training

    seen = {}

    def run(self, archs, flags):
        seen.update(flags)
        raise _Stop

    monkeypatch.setattr(data, "prepare", lambda *a, **k: SimpleNamespace(train_limit=None, data_bin="bin"))
    monkeypatch.setattr(training.Trainer, "run", run)
    with pytest.raises(_Stop):
        compare.main(["--archs", "posnet_transformer_tiny,rope_transformer_tiny", "--model-flags", "--dropout 0.2",
                      "--concat-train", "3,0.25", "--out", str(tmp_path / "out")])
    task = ["--task", "translation_concat", "--concat-max-pairs", "3", "--concat-rate", "0.25"]
    assert seen == {arch: ["--dropout", "0.2", *task] for arch in ("posnet_transformer_tiny", "rope_transformer_tiny")}


@pytest.mark.parametrize("spec,message", [("1", "--concat-train 1: --concat-max-pairs 1: must be at least 2"),
                                          ("3,1.5", "--concat-train 3,1.5: --concat-rate 1.5"),
                                          ("three", "--concat-train three: expected K"),
                                          ("3", None)])
def test_posnet_compare_concat_train_values(spec, message, capsys):
    from posnet_fairseq.compare import options

    p = options.build_parser()
    if message is None:  # K alone: the task's default share
        assert options._concat_train_flags(p, spec)[-2:] == ["--concat-rate", "0.5"]
        return
    with pytest.raises(SystemExit):
        options._concat_train_flags(p, spec)
    assert message in capsys.readouterr().err
