"""The corpus of a ``posnet-compare`` run, its test-set lengths and length buckets.

Three sources, one result (:class:`DataInfo`: the data-bin, languages, how to
score, the length buckets and the training length limit), kept by the step
``data`` (:mod:`posnet_fairseq.compare.steps`):

* synthetic (default): ``posnet_fairseq.data.synth`` with its length control:
  train and valid pairs of at most ``train_max_len`` tokens per side, a test
  set spread evenly over source-length buckets up to ``test_max_len``;
* ``--raw SRC TGT``: a user's parallel text, split into train/valid/test
  (seeded), or with the user's own ``--raw-valid`` / ``--raw-test`` file
  pairs (then the whole of SRC/TGT that is not drawn for a missing split
  trains); train and valid pairs longer than ``train_max_len`` pieces dropped, and pairs of any split
  longer than every model of the run takes (counted in results.md);
* ``--data DATA_BIN``: a binarized corpus used as it is.

With ``--concat-test K`` (the first two), runs of K consecutive test pairs joined follow the natural test
pairs in the test split (:mod:`posnet_fairseq.compare.concatenated`).

The first two get a joint SentencePiece model (``posnet-spm``) and
``fairseq-preprocess --joined-dictionary``, and are scored with sacreBLEU
against the raw reference text. Lengths (EOS excluded) are counted in the
unit the length limit was applied in: words on the synthetic corpus (whose
generator counts words; with the default 1000 pieces a word is one piece),
SentencePiece pieces with ``--raw``, the data-bin's tokens with ``--data``.
"""
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, fields
from typing import Dict, List, Optional, Tuple

from ..data import sentencepiece_model, synth
from ..data.text import read_lines
from ..process_pool import python_command
from . import concatenated

SPLITS = ("train", "valid", "test")
# The test split's first sentences, binarized again as the decoding-speed set
# (posnet_fairseq.compare.cost.write_speed_set).
SPEED_DIR = "speed-bin"
MAX_BUCKETS = 8


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _pairs(src_path, tgt_path, flag):
    """The non-empty pairs of two parallel files; ValueError naming ``flag`` and the files when they
    differ in length."""
    src, tgt = read_lines(src_path, flag), read_lines(tgt_path, flag)
    if len(src) != len(tgt):
        raise ValueError(f"{flag}: {src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}")
    pairs = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    if not pairs:
        raise ValueError(f"{flag}: no non-empty pair in {src_path} / {tgt_path}")
    return pairs


def split_raw(src_path, tgt_path, raw_dir, valid, test, seed, given=None):
    """Writes raw_dir/{train,valid,test}.{src,tgt}: a split given as ``given[split]`` = (SRC, TGT) is
    that file pair; the others are drawn from a seeded shuffle of SRC/TGT, which keeps the rest for
    training. Returns {split: where it comes from}. Raises ValueError naming the flag and the file when
    sides differ in length, a byte is not UTF-8, or no training pair is left."""
    given = given or {}
    pairs = _pairs(src_path, tgt_path, "--raw")
    sizes = {"test": test, "valid": valid}
    drawn = [split for split in ("test", "valid") if split not in given]
    if len(pairs) <= sum(sizes[split] for split in drawn):
        raise ValueError(f"--raw: {len(pairs)} non-empty pairs in {src_path}, but "
                         + " and ".join(f"--{split} {sizes[split]}" for split in drawn) + " leave none for training")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    chosen, start, origin = {}, 0, {}
    for split in drawn:
        chosen[split] = [pairs[i] for i in sorted(order[start:start + sizes[split]])]  # corpus order
        start += sizes[split]
        origin[split] = f"{len(chosen[split])} pairs drawn at random (seed {seed}) from {src_path} / {tgt_path}"
    for split, (src, tgt) in given.items():
        chosen[split] = _pairs(src, tgt, f"--raw-{split}")
        origin[split] = f"{len(chosen[split])} pairs of {src} / {tgt} (given)"
    chosen["train"] = [pairs[i] for i in sorted(order[start:])]
    origin["train"] = (f"{len(chosen['train'])} pairs of {src_path} / {tgt_path}"
                       + (", the rest after drawing " + " and ".join(drawn) if drawn else ""))
    os.makedirs(raw_dir, exist_ok=True)
    for split, split_pairs in chosen.items():
        _write_lines(os.path.join(raw_dir, f"{split}.src"), [p[0] for p in split_pairs])
        _write_lines(os.path.join(raw_dir, f"{split}.tgt"), [p[1] for p in split_pairs])
    return origin


def sentencepiece(raw_dir, out_dir, vocab_size, train_max_len=None, positions=None):
    """Joint SentencePiece model OUT/spm.model, learned on the training split, and
    OUT/spm_text/{split}.{src,tgt}; train and valid pairs over ``train_max_len`` pieces are dropped, and
    pairs of every split that no model takes (``positions``: the most (source, target) positions of the
    run's models, EOS included, as fairseq counts them; fairseq would drop them unsaid), from the raw
    text too (raw_dir/test.tgt is the reference). Returns ({split: pairs kept}, {split: pairs dropped as
    over ``positions``})."""
    prefix = os.path.join(out_dir, "spm")
    sentencepiece_model.train([os.path.join(raw_dir, "train.src"), os.path.join(raw_dir, "train.tgt")], prefix,
                              vocab_size)
    encode = sentencepiece_model.encoder(prefix + ".model")
    text_dir = os.path.join(out_dir, "spm_text")
    os.makedirs(text_dir, exist_ok=True)
    kept, too_long = {}, {}
    for split in SPLITS:
        raw = [read_lines(os.path.join(raw_dir, f"{split}.{lang}")) for lang in ("src", "tgt")]
        pairs = [(encode(s), encode(t)) for s, t in zip(*raw)]
        if positions is not None:
            fits = [len(p[0].split()) < positions[0] and len(p[1].split()) < positions[1] for p in pairs]
            too_long[split] = fits.count(False)
            pairs = [p for p, fit in zip(pairs, fits) if fit]
            if not pairs:
                raise ValueError(f"--raw: no {split} pair fits the models' {positions[0]} source / {positions[1]} "
                                 "target positions (--max-source-positions, --max-target-positions)")
            if too_long[split]:
                for side, lang in enumerate(("src", "tgt")):
                    _write_lines(os.path.join(raw_dir, f"{split}.{lang}"),
                                 [line for line, fit in zip(raw[side], fits) if fit])
        if train_max_len is not None and split != "test":
            pairs = [p for p in pairs if max(len(p[0].split()), len(p[1].split())) <= train_max_len]
            if not pairs:
                raise ValueError(f"--train-max-len {train_max_len}: no {split} pair is that short")
        kept[split] = len(pairs)
        for side, lang in enumerate(("src", "tgt")):
            _write_lines(os.path.join(text_dir, f"{split}.{lang}"), [p[side] for p in pairs])
    return kept, too_long


def binarize(text_dir, data_bin, log_path):
    """fairseq-preprocess with a joined dictionary (a subprocess; its log goes to ``log_path``)."""
    command = python_command("fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
                             "--joined-dictionary", "--workers", "1", "--destdir", data_bin,
                             *[arg for split in SPLITS for arg in (f"--{split}pref", os.path.join(text_dir, split))])
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


def load_dictionary(data_bin, lang):
    from fairseq.data import Dictionary

    return Dictionary.load(os.path.join(data_bin, f"dict.{lang}.txt"))


def load_split(data_bin, split, src, tgt, lang):
    from fairseq.data import data_utils

    prefix = os.path.join(data_bin, f"{split}.{src}-{tgt}.{lang}")
    dataset = data_utils.load_indexed_dataset(prefix, load_dictionary(data_bin, lang))
    if dataset is None:
        raise ValueError(f"no binarized {split} split at {prefix}.{{bin,idx}}")
    return dataset


def split_lengths(data_bin, split, src, tgt, lang=None):
    """Tokens (EOS excluded) of every sentence of a binarized split, on the ``lang`` side (source)."""
    dataset = load_split(data_bin, split, src, tgt, lang or src)
    # sizes is a view into the dataset's memory map: read it while the dataset is alive.
    lengths = [int(n) - 1 for n in dataset.sizes]
    del dataset
    return lengths


def buckets_for(train_max_len, longest_test):
    """Length buckets (lo, hi) for a user corpus: width ceil(L / 2) from 1 up to the longest test
    sentence, at most MAX_BUCKETS (the last one then takes everything longer); L is the longest training
    length, or the longest test sentence when that is shorter (else one bucket would span the test set)."""
    width = max(1, -(-min(train_max_len, longest_test) // 2))
    buckets = []
    lo = 1
    while lo <= longest_test:
        hi = lo + width - 1
        if len(buckets) == MAX_BUCKETS - 1:
            hi = max(hi, longest_test)
        buckets.append((lo, hi))
        lo = hi + 1
    return buckets


def merge_small_buckets(buckets, lengths, minimum, train_limit):
    """[(lo, hi, too_small)]: every bucket of ``buckets`` ([(lo, hi)]) holding fewer than ``minimum`` of the
    test sentences' ``lengths`` is merged into its neighbour on the same side of the training limit (the
    shorter one first), until none is left or none has such a neighbour; those left are marked too small
    (not scored). A bucket never mixes lengths inside and beyond training, and merging never leaves one
    bucket for the whole test set (that would be no length analysis at all)."""
    merged = [list(b) for b in buckets]

    def count(b):
        return sum(b[0] <= n <= b[1] for n in lengths)

    def side(b):
        return b[0] > train_limit

    while True:
        small = [i for i, b in enumerate(merged) if count(b) < minimum and len(merged) > 2
                 and any(0 <= j < len(merged) and side(merged[j]) == side(b) for j in (i - 1, i + 1))]
        if not small:
            break
        i = small[0]
        j = i - 1 if i > 0 and side(merged[i - 1]) == side(merged[i]) else i + 1
        lo, hi = min(merged[i][0], merged[j][0]), max(merged[i][1], merged[j][1])
        merged[min(i, j)] = [lo, hi]
        del merged[max(i, j)]
    return [(lo, hi, count((lo, hi)) < minimum) for lo, hi in merged]


@dataclass(frozen=True)
class DataInfo:
    """What the run knows about its corpus: the record of the data step (:meth:`stored`, :meth:`read`)."""

    data_bin: str
    source_lang: str
    target_lang: str
    post_process: Optional[str]  # fairseq-generate's --post-process
    references: Optional[str]  # the raw reference text; None: fairseq's T- lines
    train_max_len: Optional[int]
    longest_train: int
    vocab: int
    buckets: List[Tuple[int, int]]
    length_unit: str  # words, pieces or tokens
    test_lengths: List[int]
    test_sentences: int
    train_pairs: int
    splits: Optional[Dict[str, str]] = None  # --raw: where each split comes from
    too_long: Optional[Dict[str, int]] = None  # --raw: pairs of each split left out, longer than ``positions``
    positions: Optional[List[int]] = None  # --raw: the most (source, target) positions of the run's models
    concatenated: Optional[dict] = None  # --concat-test: the joined test examples (compare.concatenated)

    def stored(self, relative):
        """What the data step keeps (its result): not the data-bin, which the run names; the references by
        ``relative`` (Steps.relative: relative to --out)."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "data_bin"}
        return dict(kept, references=None if self.references is None else relative(self.references))

    @classmethod
    def read(cls, steps, stored, data_bin):
        """The DataInfo of a data step's stored result; ``data_bin``: --data's, else the run's own."""
        own = os.path.join(steps.out, "data-bin")
        references = stored["references"]
        return cls(data_bin=os.path.abspath(data_bin) if data_bin else own,
                   references=None if references is None else steps.absolute(references),
                   buckets=[tuple(b) for b in stored["buckets"]],
                   **{k: v for k, v in stored.items() if k not in ("references", "buckets")})

    @property
    def train_limit(self):
        return self.train_max_len or self.longest_train

    @property
    def langs(self):
        return self.source_lang, self.target_lang


def prepare(steps, mode, log, *, raw=None, raw_given=None, data_bin=None, post_process=None,
            train_max_len=None, test_max_len=None, n_buckets=5, synth_train=20000, valid=300, test=500,
            vocab_size=None, seed=1, positions=None, concat_test=None) -> DataInfo:
    """Makes (or reuses) the run's corpus (the step "data" of ``steps``, a
    :class:`posnet_fairseq.compare.steps.Steps`). Its input files are known by their content, not their paths:
    a run on other data in the same --out is refused. ``positions``: the most (source, target) positions the
    run's models take; --raw pairs longer than that are left out (None: none is). ``concat_test``: K of
    --concat-test (:mod:`posnet_fairseq.compare.concatenated`), None without."""
    out_dir = steps.out
    settings = _settings(mode, post_process, train_max_len, test_max_len, n_buckets, synth_train, valid, test,
                         vocab_size, seed, positions, concat_test)
    inputs = _inputs(mode, raw, raw_given, data_bin)
    why = steps.why_not_done("data", settings, inputs)
    if why is None:
        log(f"data: skipped, prepared earlier ({steps.relative(steps.dir)}/data.json)")
        return DataInfo.read(steps, steps.result("data"), data_bin)
    if why.startswith(("its settings", "its input")):
        raise ValueError(f"{out_dir} holds a run on other data ({why.replace('its ', '', 1)}); use a new --out")
    if why != "not finished":
        log(f"data: prepared again: {why}")

    # Leftovers of an interrupted preparation are made again.
    for name in ("raw", "spm_text", "data-bin", SPEED_DIR):
        shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    raw_dir = os.path.join(out_dir, "raw")
    origin, too_long, joined = None, None, None
    if mode == "data":
        data_bin = os.path.abspath(data_bin)
        src, tgt = infer_languages(data_bin)
        references = None  # fairseq-generate's T- lines, post-processed like the hypotheses
    else:
        if mode == "synthetic":
            stats = synth.write_corpus(raw_dir, train=synth_train, valid=valid, test=test, seed=seed,
                                       max_len=train_max_len, test_max_len=test_max_len, test_buckets=n_buckets)
            log(f"data: synthetic corpus in {raw_dir}: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
        else:
            origin = split_raw(raw[0], raw[1], raw_dir, valid, test, seed, raw_given)
            for split in SPLITS:
                log(f"data: {split}: {origin[split]}")
        too_long, joined = _pieces(out_dir, raw_dir, mode, vocab_size, train_max_len, positions, concat_test, log)
        data_bin = os.path.join(out_dir, "data-bin")
        binarize(os.path.join(out_dir, "spm_text"), data_bin, os.path.join(out_dir, "preprocess.log"))
        src, tgt, post_process = "src", "tgt", "sentencepiece"
        references = os.path.join(raw_dir, "test.tgt")
    log(f"data: binarized corpus {data_bin} ({src} -> {tgt})")
    train_pairs, test_lengths, longest_train, unit = _lengths(data_bin, raw_dir, mode, src, tgt)
    test_lengths, joined = concatenated.separate(test_lengths, joined)
    buckets = (synth.length_buckets(test_max_len, n_buckets) if mode == "synthetic"
               else buckets_for(train_max_len or longest_train, max(test_lengths)))
    info = DataInfo(data_bin, src, tgt, post_process, references, train_max_len, longest_train,
                    len(load_dictionary(data_bin, tgt)), buckets, unit, test_lengths, len(test_lengths), train_pairs,
                    splits=origin if mode == "raw" else None, too_long=too_long if mode == "raw" else None,
                    positions=list(positions) if mode == "raw" and positions else None, concatenated=joined)
    steps.finish("data", settings, inputs, [] if mode == "data" else [data_bin, raw_dir], info.stored(steps.relative))
    # Read back as a re-run reads it, so that the first run and a re-run see the same figures.
    return DataInfo.read(steps, steps.result("data"), data_bin)


def _inputs(mode, raw, raw_given, data_bin):
    """The step "data"'s inputs: the user's files, known by their content."""
    inputs = {"data-bin": data_bin} if mode == "data" else {}
    if mode == "raw":
        inputs.update({"raw source": raw[0], "raw target": raw[1]})
        for split, (src, tgt) in (raw_given or {}).items():
            inputs.update({f"{split} source": src, f"{split} target": tgt})
    return inputs


def _settings(mode, post_process, train_max_len, test_max_len, n_buckets, synth_train, valid, test, vocab_size,
              seed, positions, concat_test):
    """The step "data"'s settings (:func:`prepare`'s arguments that make the corpus)."""
    settings = {"mode": mode, "post_process": post_process,
                "train_max_len": train_max_len, "test_max_len": test_max_len, "buckets_requested": n_buckets,
                "synth_train": synth_train, "valid": valid, "test": test, "vocab_size": vocab_size, "seed": seed}
    if mode == "raw" or concat_test:  # pairs longer than the models take are left out
        settings["positions"] = list(positions) if positions else None
    if concat_test:
        settings["concat_test"] = concat_test
    return settings


def _pieces(out_dir, raw_dir, mode, vocab_size, train_max_len, positions, concat_test, log):
    """The SentencePiece text of the raw splits in ``out_dir``/spm_text, the joined test examples of
    --concat-test after the natural ones; returns (over-long pairs left out per split, what the test split
    holds of the joined examples or None)."""
    # Joined from the test split as given, before an over-long pair is left out: a run is K consecutive lines.
    runs = concatenated.joined_test(raw_dir, concat_test) if concat_test else None
    kept, too_long = sentencepiece(raw_dir, out_dir, vocab_size, train_max_len if mode == "raw" else None,
                                   positions if mode == "raw" else None)
    log(f"data: SentencePiece ({vocab_size} pieces at most) -> {out_dir}/spm.model; pairs kept: "
        + ", ".join(f"{k} {v}" for k, v in kept.items()))
    if any(too_long.values()):
        log(f"data: left out as longer than the models take ({positions[0]} source / {positions[1]} target "
            "positions): " + ", ".join(f"{k} {v}" for k, v in too_long.items()))
    if not runs:
        return too_long, None
    joined = concatenated.append_to_test(runs, concat_test, raw_dir, os.path.join(out_dir, "spm_text"),
                                         sentencepiece_model.encoder(os.path.join(out_dir, "spm.model")), positions)
    log(f"data: --concat-test {concat_test}: {joined['examples']} joined test examples, "
        f"{joined['too_long']} left out as longer than the models take, the last {joined['tail']} test "
        "pairs not joined")
    return too_long, joined


def _lengths(data_bin, raw_dir, mode, src, tgt):
    """(training pairs, each test sentence's source length, the longest training length, their unit)."""
    train_lengths = split_lengths(data_bin, "train", src, tgt)
    if mode == "synthetic":
        # The generator counts words (a piece is a word unless --vocab-size is tiny).
        test_lengths = [len(line.split()) for line in read_lines(os.path.join(raw_dir, "test.src"))]
        longest_train = max(len(line.split()) for split in ("train", "valid") for lang in ("src", "tgt")
                            for line in read_lines(os.path.join(raw_dir, f"{split}.{lang}")))
        return len(train_lengths), test_lengths, longest_train, "words"
    test_lengths = split_lengths(data_bin, "test", src, tgt)
    longest_train = max(train_lengths + split_lengths(data_bin, "train", src, tgt, tgt))
    return len(train_lengths), test_lengths, longest_train, "pieces" if mode == "raw" else "tokens"


def finished(steps, data_bin=None) -> Optional[DataInfo]:
    """The DataInfo of the finished data step of ``steps`` (a finished run read again), None without one;
    ``data_bin``: a --data run's data-bin."""
    record = steps.load("data")
    return None if record is None or record.result is None else DataInfo.read(steps, record.result, data_bin)
