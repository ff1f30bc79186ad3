"""Corpus statistics the models need: the length ratio gamma.

gamma = mean source length / mean target length over the binarized training
set, in BPE tokens and excluding the EOS that fairseq appends to every
sentence. Cross-attention mixers centre target position i on source position
gamma * i.
"""
import os

from fairseq.data import data_utils


class NoTrainingData(ValueError):
    """gamma is asked of a model built without its training set's location (a flag check, a test)."""


def _split_sizes(prefix):
    dataset = data_utils.load_indexed_dataset(prefix, None)
    if dataset is None:
        raise FileNotFoundError(
            f"cannot compute the length ratio: no binarized data at {prefix}.{{bin,idx}}; "
            "pass --length-ratio GAMMA"
        )
    # A copy: the sizes are a view into the dataset's memory map, which closes
    # (and would leave a dangling view) when the dataset is collected.
    return dataset.sizes.astype("int64", copy=True)


def length_ratio(data_dir, src, tgt, split="train"):
    prefixes = [os.path.join(data_dir, f"{split}.{a}-{b}.") for a, b in ((src, tgt), (tgt, src))]
    prefix = next((p for p in prefixes if os.path.exists(p + src + ".idx")), prefixes[0])
    src_sizes, tgt_sizes = _split_sizes(prefix + src), _split_sizes(prefix + tgt)
    pairs = len(src_sizes)
    return float(src_sizes.sum() - pairs) / float(tgt_sizes.sum() - pairs)


def length_ratio_from_task(task):
    data = getattr(task.cfg, "data", None)
    if not data:
        raise NoTrainingData("cannot compute the length ratio without a data directory: pass --length-ratio GAMMA")
    src, tgt = task.cfg.source_lang, task.cfg.target_lang
    if not src or not tgt:
        raise NoTrainingData(
            "cannot compute the length ratio without --source-lang/--target-lang: pass --length-ratio GAMMA")
    return length_ratio(data.split(os.pathsep)[0], src, tgt)
