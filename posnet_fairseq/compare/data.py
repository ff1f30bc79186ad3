"""The corpus of a ``posnet-compare`` run, its test-set lengths and length buckets.

Three sources, one result (``OUT/data.json``: the data-bin, languages, how to
score, the length buckets and the training length limit):

* synthetic (default): ``posnet_fairseq.data.synth`` with its length control:
  train and valid pairs of at most ``train_max_len`` tokens per side, a test
  set spread evenly over source-length buckets up to ``test_max_len``;
* ``--raw SRC TGT``: a user's parallel text, split into train/valid/test
  (seeded), train and valid pairs longer than ``train_max_len`` pieces dropped;
* ``--data DATA_BIN``: a binarized corpus used as it is.

The first two get a joint SentencePiece model (``posnet-spm``) and
``fairseq-preprocess --joined-dictionary``, and are scored with sacreBLEU
against the raw reference text. Lengths (EOS excluded) are counted in the
unit the length limit was applied in: words on the synthetic corpus (whose
generator counts words; with the default 1000 pieces a word is one piece),
SentencePiece pieces with ``--raw``, the data-bin's tokens with ``--data``.
"""
import json
import os
import random
import shutil
import subprocess
import sys

from ..data import synth

SPLITS = ("train", "valid", "test")
# The test split's first sentences, binarized again as the decoding-speed set (cost phase).
SPEED_DIR = "speed-bin"
MAX_BUCKETS = 8


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def split_raw(src_path, tgt_path, raw_dir, valid, test, seed):
    """Splits a user's parallel text into raw_dir/{train,valid,test}.{src,tgt} (seeded shuffle).
    Raises ValueError naming the file when the sides differ in length or leave no training pairs."""
    src, tgt = _read_lines(src_path), _read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(f"--raw: {src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}")
    pairs = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    if len(pairs) <= valid + test:
        raise ValueError(f"--raw: {len(pairs)} non-empty pairs in {src_path}, but --valid {valid} and "
                         f"--test {test} leave none for training")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    chosen = {"test": order[:test], "valid": order[test:test + valid], "train": order[test + valid:]}
    os.makedirs(raw_dir, exist_ok=True)
    for split, ids in chosen.items():
        ids = sorted(ids)  # corpus order within each split
        _write_lines(os.path.join(raw_dir, f"{split}.src"), [pairs[i][0] for i in ids])
        _write_lines(os.path.join(raw_dir, f"{split}.tgt"), [pairs[i][1] for i in ids])


def sentencepiece(raw_dir, out_dir, vocab_size, train_max_len=None):
    """Joint SentencePiece model OUT/spm.model, learned on the training split, and
    OUT/spm_text/{split}.{src,tgt}; train and valid pairs over ``train_max_len`` pieces are dropped.
    Returns {split: pairs kept}."""
    import sentencepiece as spm

    from ..cli import spm as spm_cli

    prefix = os.path.join(out_dir, "spm")
    spm_cli.main(["train", "--input", os.path.join(raw_dir, "train.src"), os.path.join(raw_dir, "train.tgt"),
                  "--model-prefix", prefix, "--vocab-size", str(vocab_size)])
    processor = spm.SentencePieceProcessor(model_file=prefix + ".model")
    text_dir = os.path.join(out_dir, "spm_text")
    os.makedirs(text_dir, exist_ok=True)
    kept = {}
    for split in SPLITS:
        sides = [[" ".join(processor.encode(line, out_type=str)) for line in _read_lines(
            os.path.join(raw_dir, f"{split}.{lang}"))] for lang in ("src", "tgt")]
        pairs = list(zip(*sides))
        if train_max_len is not None and split != "test":
            pairs = [p for p in pairs if max(len(p[0].split()), len(p[1].split())) <= train_max_len]
            if not pairs:
                raise ValueError(f"--train-max-len {train_max_len}: no {split} pair is that short")
        kept[split] = len(pairs)
        for side, lang in enumerate(("src", "tgt")):
            _write_lines(os.path.join(text_dir, f"{split}.{lang}"), [p[side] for p in pairs])
    return kept


def binarize(text_dir, data_bin, log_path):
    """fairseq-preprocess with a joined dictionary (a subprocess; its log goes to ``log_path``)."""
    command = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
               "--joined-dictionary", "--workers", "1", "--destdir", data_bin,
               *[arg for split in SPLITS for arg in (f"--{split}pref", os.path.join(text_dir, split))]]
    with open(log_path, "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"fairseq-preprocess failed, see {log_path}")


def infer_languages(data_bin):
    """(source, target) language of a data-bin from its test split's file names."""
    pairs = {name.split(".")[1] for name in os.listdir(data_bin)
             if name.startswith("test.") and name.endswith(".idx") and name.count(".") == 3}
    if len(pairs) != 1:
        raise ValueError(f"--data {data_bin}: expected one test.SRC-TGT.*.idx language pair, found "
                         f"{sorted(pairs) or 'none'}")
    src, tgt = pairs.pop().split("-")
    return src, tgt


def _dictionary(data_bin, lang):
    from fairseq.data import Dictionary

    return Dictionary.load(os.path.join(data_bin, f"dict.{lang}.txt"))


def _dataset(data_bin, split, src, tgt, lang):
    from fairseq.data import data_utils

    prefix = os.path.join(data_bin, f"{split}.{src}-{tgt}.{lang}")
    dataset = data_utils.load_indexed_dataset(prefix, _dictionary(data_bin, lang))
    if dataset is None:
        raise ValueError(f"no binarized {split} split at {prefix}.{{bin,idx}}")
    return dataset


def split_lengths(data_bin, split, src, tgt, lang=None):
    """Tokens (EOS excluded) of every sentence of a binarized split, on the ``lang`` side (source)."""
    dataset = _dataset(data_bin, split, src, tgt, lang or src)
    # sizes is a view into the dataset's memory map: read it while the dataset is alive.
    lengths = [int(n) - 1 for n in dataset.sizes]
    del dataset
    return lengths


def write_speed_set(data_bin, out_dir, sentences, src, tgt):
    """OUT/speed-bin: the first ``sentences`` test sentences as the split "test", with the dictionaries
    (made again each time: the number of sentences is a setting of the cost measurement)."""
    from fairseq.data import indexed_dataset

    speed = os.path.join(out_dir, SPEED_DIR)
    shutil.rmtree(speed, ignore_errors=True)
    os.makedirs(speed)
    for lang in (src, tgt):
        shutil.copyfile(os.path.join(data_bin, f"dict.{lang}.txt"), os.path.join(speed, f"dict.{lang}.txt"))
        dataset = _dataset(data_bin, "test", src, tgt, lang)
        prefix = os.path.join(speed, f"test.{src}-{tgt}.{lang}")
        builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(_dictionary(data_bin, lang)))
        for i in range(min(sentences, len(dataset))):
            builder.add_item(dataset[i])
        builder.finalize(prefix + ".idx")
    return speed


def buckets_for(train_max_len, longest_test):
    """Length buckets (lo, hi) for a user corpus: width ceil(L / 2) from 1 up to the longest test
    sentence, at most MAX_BUCKETS (the last one then takes everything longer)."""
    width = max(1, -(-train_max_len // 2))
    buckets = []
    lo = 1
    while lo <= longest_test:
        hi = lo + width - 1
        if len(buckets) == MAX_BUCKETS - 1:
            hi = max(hi, longest_test)
        buckets.append((lo, hi))
        lo = hi + 1
    return buckets


def prepare(out_dir, mode, log, *, raw=None, data_bin=None, post_process=None, train_max_len=None,
            test_max_len=None, n_buckets=5, synth_train=20000, valid=300, test=500, vocab_size=None, seed=1):
    """Makes (or reuses) the run's corpus; returns the info dict also stored in OUT/data.json."""
    info_path = os.path.join(out_dir, "data.json")
    settings = {"mode": mode, "raw": raw, "data": data_bin, "post_process": post_process,
                "train_max_len": train_max_len, "test_max_len": test_max_len, "buckets_requested": n_buckets,
                "synth_train": synth_train, "valid": valid, "test": test, "vocab_size": vocab_size, "seed": seed}
    if os.path.exists(info_path):
        with open(info_path) as f:
            info = json.load(f)
        if info["settings"] != settings:
            changed = sorted(k for k in settings if info["settings"].get(k) != settings[k])
            raise ValueError(f"{out_dir} holds a run on other data (changed: {', '.join(changed)}); "
                             f"use a new --out")
        log(f"data: skipped, prepared earlier ({info_path})")
        return info

    # Leftovers of an interrupted preparation are made again.
    for name in ("raw", "spm_text", "data-bin", SPEED_DIR):
        shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    raw_dir = os.path.join(out_dir, "raw")
    if mode == "synthetic":
        stats = synth.write_corpus(raw_dir, train=synth_train, valid=valid, test=test, seed=seed,
                                   max_len=train_max_len, test_max_len=test_max_len, test_buckets=n_buckets)
        log(f"data: synthetic corpus in {raw_dir}: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    elif mode == "raw":
        split_raw(raw[0], raw[1], raw_dir, valid, test, seed)
        log(f"data: {raw[0]} / {raw[1]} split into {raw_dir} (valid {valid}, test {test})")
    if mode in ("synthetic", "raw"):
        kept = sentencepiece(raw_dir, out_dir, vocab_size, train_max_len if mode == "raw" else None)
        log(f"data: SentencePiece ({vocab_size} pieces at most) -> {out_dir}/spm.model; pairs kept: "
            + ", ".join(f"{k} {v}" for k, v in kept.items()))
        data_bin = os.path.join(out_dir, "data-bin")
        binarize(os.path.join(out_dir, "spm_text"), data_bin, os.path.join(out_dir, "preprocess.log"))
        src, tgt, post_process = "src", "tgt", "sentencepiece"
        references = os.path.join(raw_dir, "test.tgt")
    else:
        data_bin = os.path.abspath(data_bin)
        src, tgt = infer_languages(data_bin)
        references = None  # fairseq-generate's T- lines, post-processed like the hypotheses
    log(f"data: binarized corpus {data_bin} ({src} -> {tgt})")

    train_lengths = split_lengths(data_bin, "train", src, tgt)
    if mode == "synthetic":
        # The generator counts words (a piece is a word unless --vocab-size is tiny).
        unit = "words"
        test_lengths = [len(line.split()) for line in _read_lines(os.path.join(raw_dir, "test.src"))]
        longest_train = max(len(line.split()) for split in ("train", "valid") for lang in ("src", "tgt")
                            for line in _read_lines(os.path.join(raw_dir, f"{split}.{lang}")))
        buckets = synth.length_buckets(test_max_len, n_buckets)
    else:
        unit = "pieces" if mode == "raw" else "tokens"
        test_lengths = split_lengths(data_bin, "test", src, tgt)
        longest_train = max(train_lengths + split_lengths(data_bin, "train", src, tgt, tgt))
        buckets = buckets_for(train_max_len or longest_train, max(test_lengths))
    info = {"settings": settings, "data_bin": data_bin, "source_lang": src,
            "target_lang": tgt, "post_process": post_process, "references": references,
            "train_max_len": train_max_len, "longest_train": longest_train,
            "vocab": len(_dictionary(data_bin, tgt)), "buckets": buckets, "length_unit": unit,
            "test_lengths": test_lengths, "test_sentences": len(test_lengths), "train_pairs": len(train_lengths)}
    with open(info_path + ".tmp", "w") as f:
        json.dump(info, f, indent=2)
    os.replace(info_path + ".tmp", info_path)
    return info
